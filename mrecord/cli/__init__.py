"""The ``mrecord`` command (click): convert, info, head, verify, reindex, stats, cat, bench."""
