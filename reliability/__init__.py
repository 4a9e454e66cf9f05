"""mrecord's own reliability harnesses and campaigns (in the repository, not shipped).

- :mod:`reliability.crash`: a writer run in a subprocess and SIGKILLed (at a random delay,
  or at a commit step through ``mrecord.storage.commit.crash_hook``), then checked.
- :mod:`reliability.steps`: the same writer (plus a reindex) SIGKILLed at every commit step in
  turn, for names with and without trailing digits and several shard counts, then opened first
  by a reader, an appender, ``reindex`` or ``verify``.
- :mod:`reliability.ray_sweep`: the Ray sink's driver SIGKILLed at every step of its publish.
- :mod:`reliability.corrupt`: byte-level damage to files and its checks.
- :mod:`reliability.hostile`: hand-made shard files with hostile metadata or chunks.
- :mod:`reliability.concurrency`: writers, readers and reindexers racing in several processes.
- ``*_campaign.py``: the long runs whose figures docs/RELIABILITY.md publishes.
"""
