"""Ray Data integration: read and write mrecord datasets from a Ray cluster.

::

    import ray
    from mrecord.ray import read_mrecord, write_mrecord

    ds = read_mrecord("train.mrecord0", columns=["image", "label"])
    ds = ds.map_batches(preprocess)
    write_mrecord(ds, "out/train.mrecord", shard_num=8)

- :func:`read_mrecord` / :class:`MRecordDatasource`: a Ray ``Datasource`` planned on the
  driver from the shards' metadata; each read task opens the shards it needs itself.
- :func:`write_mrecord` / :class:`MRecordDatasink`: write tasks write staged parts,
  the driver publishes them as one dataset with mrecord's commit journal (all or nothing).
- :func:`convert`: the ``mrecord.convert`` sources parsed in Ray tasks, written by the sink.

Needs the optional extra: ``pip install 'mrecord[ray]'`` (``ray[data]>=2.60,<2.61``).
See docs/RAY.md.
"""

from __future__ import annotations

from mrecord.errors import MissingDependencyError

try:
    import pyarrow  # noqa: F401
    import ray.data  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "mrecord.ray needs Ray Data, an optional dependency: pip install 'mrecord[ray]' "
        f"({exc})"
    ) from exc

from mrecord.ray.convert import convert
from mrecord.ray.datasink import MRecordDatasink, write_mrecord
from mrecord.ray.datasource import MRecordDatasource, read_mrecord

__all__ = [
    "MRecordDatasink",
    "MRecordDatasource",
    "convert",
    "read_mrecord",
    "write_mrecord",
]
