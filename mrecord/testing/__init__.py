"""Test support shipped with mrecord: hypothesis strategies and reliability harnesses.

- :mod:`mrecord.testing.strategies`: schemas, rows that fit them, shard counts,
  page sizes, compression choices, world sizes (needs ``hypothesis``).
- :mod:`mrecord.testing.model`: the documented row distribution as a plain model,
  and helpers that compare what a reader returns with what was written.
- :mod:`mrecord.testing.crash`: a writer run in a subprocess and SIGKILLed.
- :mod:`mrecord.testing.corrupt`: byte-level damage to files and its checks.
"""
