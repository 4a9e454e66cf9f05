"""Maintenance of committed datasets: ``verify``, ``inspect`` and ``reindex``."""
