"""A test kit for code built on mrecord (shipped): hypothesis strategies, bad inputs, a model.

- :mod:`mrecord.testing.strategies`: schemas, rows that fit them, shard counts,
  page sizes, compression choices, world sizes (needs ``hypothesis``).
- :mod:`mrecord.testing.bad_inputs`: values that a schema field must refuse.
- :mod:`mrecord.testing.model`: the documented row distribution as a plain model,
  and helpers that compare what a reader returns with what was written.
- :mod:`mrecord.testing.mixed`: a small dataset with one column of every kind.

mrecord's own harnesses are not here: the crash and corruption ones live in the
repository's top-level ``reliability/`` package, the storage stand-ins, the serve load
test, the browser and the gallery dataset in ``harness/`` (neither is shipped).
"""
