"""Hypothesis strategies for mrecord: schemas, rows that fit them, and writer settings.

Use them to property-test anything that stores or reads rows::

    from hypothesis import given
    from mrecord.testing import strategies as mst

    @given(mst.datasets())
    def test_roundtrip(ds): ...

Schemas are MindSpore-style dicts (``{"label": {"type": "int32"}}``) so they can
be passed to ``FileWriter.add_schema`` as is. Values follow the write contract:
numeric scalars as Python numbers, arrays as numpy arrays of exactly the field's
dtype, bytes as ``bytes``, strings as ``str``. Generated data covers empty bytes
and strings, unicode, zero-size and variable dimensions, NaN and infinities,
every dtype including float16 and bool, and occasional blobs of tens of KB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mrecord.format.schema import NUMERIC_TYPES

__all__ = [
    "ALL_TYPES",
    "BLOB_TYPES",
    "DatasetCase",
    "compressions",
    "datasets",
    "field_names",
    "field_specs",
    "index_fields_for",
    "page_sizes",
    "rank_and_world",
    "row_for",
    "rows_for",
    "schemas",
    "shard_counts",
    "value_for",
    "world_sizes",
    "write_calls",
]

BLOB_TYPES = ("string", "bytes")
ALL_TYPES = (*sorted(NUMERIC_TYPES), *BLOB_TYPES)
_FLOAT_WIDTH = {"float16": 16, "float32": 32, "float64": 64}


def field_names() -> st.SearchStrategy[str]:
    """Valid field names (``^[0-9A-Za-z_]+$``), SQL keywords included by chance."""
    return st.one_of(
        st.from_regex(r"[0-9A-Za-z_]{1,10}", fullmatch=True),
        st.sampled_from(["select", "rows", "page", "slot", "row_id", "key", "value", "_", "0"]),
    )


def compressions() -> st.SearchStrategy[str]:
    """A per-field compression choice."""
    return st.sampled_from(["none", "zstd"])


def _dims() -> st.SearchStrategy[int]:
    return st.one_of(st.just(-1), st.integers(0, 4))


@st.composite
def field_specs(draw: st.DrawFn, types: tuple[str, ...] = ALL_TYPES) -> dict[str, Any]:
    """One field spec: a type, maybe a shape (numeric only, ``-1`` = variable), a codec."""
    ftype = draw(st.sampled_from(types))
    spec: dict[str, Any] = {"type": ftype}
    if ftype in NUMERIC_TYPES and draw(st.booleans()):
        spec["shape"] = draw(st.lists(_dims(), min_size=1, max_size=3))
    codec = draw(compressions())
    if codec != "none":
        spec["compression"] = codec
    return spec


def schemas(
    max_fields: int = 5, types: tuple[str, ...] = ALL_TYPES
) -> st.SearchStrategy[dict[str, dict[str, Any]]]:
    """MindSpore-style schema dicts of 1..``max_fields`` fields."""
    return st.dictionaries(field_names(), field_specs(types), min_size=1, max_size=max_fields)


def _blob(n: int) -> bytes:
    """``n`` incompressible bytes, deterministic in ``n``."""
    return np.random.default_rng(n).bytes(n)


def _bytes_values() -> st.SearchStrategy[bytes]:
    small = st.binary(max_size=40)
    large = st.integers(2_000, 70_000).map(_blob)
    return st.one_of(small, small, small, large)


def _scalar(ftype: str) -> st.SearchStrategy[Any]:
    if ftype == "bool":
        return st.booleans()
    dtype = NUMERIC_TYPES[ftype]
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return st.integers(int(info.min), int(info.max))
    return st.floats(width=_FLOAT_WIDTH[ftype])  # type: ignore[arg-type]


def _array(ftype: str, shape: list[int]) -> st.SearchStrategy[np.ndarray]:
    dims = [st.integers(0, 4) if d == -1 else st.just(d) for d in shape]
    return st.tuples(*dims).flatmap(
        lambda concrete: hnp.arrays(NUMERIC_TYPES[ftype], concrete, elements=_scalar(ftype))
    )


def value_for(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A value that fits ``spec`` (a field spec as in a schema dict)."""
    ftype = spec["type"]
    if ftype == "bytes":
        return _bytes_values()
    if ftype == "string":
        return st.text(max_size=20)
    if spec.get("shape") is None:
        return _scalar(ftype)
    return _array(ftype, list(spec["shape"]))


def row_for(schema: dict[str, dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """One row dict that fits ``schema``."""
    return st.fixed_dictionaries({name: value_for(spec) for name, spec in schema.items()})


def rows_for(
    schema: dict[str, dict[str, Any]], min_size: int = 0, max_size: int = 12
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """A list of rows that fit ``schema`` (one ``write_raw_data`` call)."""
    return st.lists(row_for(schema), min_size=min_size, max_size=max_size)


def write_calls(
    schema: dict[str, dict[str, Any]], max_calls: int = 3, max_rows: int = 12
) -> st.SearchStrategy[list[list[dict[str, Any]]]]:
    """Several ``write_raw_data`` calls' worth of rows (calls may be empty)."""
    return st.lists(rows_for(schema, 0, max_rows), min_size=1, max_size=max_calls)


def shard_counts(max_shards: int = 5) -> st.SearchStrategy[int]:
    """``shard_num`` values, 1..``max_shards``."""
    return st.integers(1, max_shards)


def page_sizes() -> st.SearchStrategy[int]:
    """Target page sizes: mostly the minimum (1 KiB, many pages), sometimes the default."""
    return st.sampled_from([1024, 1024, 2048, 4096, 1 << 20])


def world_sizes(max_world: int = 8) -> st.SearchStrategy[int]:
    """Distributed world sizes (``num_shards`` of a reader)."""
    return st.integers(1, max_world)


def rank_and_world(max_world: int = 8) -> st.SearchStrategy[tuple[int, int]]:
    """``(shard_id, num_shards)`` pairs with ``0 <= shard_id < num_shards``."""
    return world_sizes(max_world).flatmap(lambda w: st.tuples(st.integers(0, w - 1), st.just(w)))


def index_fields_for(schema: dict[str, dict[str, Any]]) -> st.SearchStrategy[list[str]]:
    """A (possibly empty) list of fields ``add_index`` accepts: scalar numbers and strings."""
    ok = [
        name
        for name, spec in schema.items()
        if spec["type"] == "string" or (spec["type"] != "bytes" and spec.get("shape") is None)
    ]
    if not ok:
        return st.just([])
    return st.lists(st.sampled_from(ok), unique=True, max_size=len(ok))


@dataclass
class DatasetCase:
    """Everything needed to write one dataset: schema, calls of rows and writer settings."""

    schema: dict[str, dict[str, Any]]
    calls: list[list[dict[str, Any]]]
    shard_num: int
    page_size: int
    index_fields: list[str]

    @property
    def rows(self) -> list[dict[str, Any]]:
        """Every row in the order written."""
        return [row for call in self.calls for row in call]


@st.composite
def datasets(
    draw: st.DrawFn, max_fields: int = 4, max_shards: int = 5, max_calls: int = 3
) -> DatasetCase:
    """A schema, rows that fit it in several calls, a shard count, page size and indexes."""
    schema = draw(schemas(max_fields))
    return DatasetCase(
        schema=schema,
        calls=draw(write_calls(schema, max_calls)),
        shard_num=draw(shard_counts(max_shards)),
        page_size=draw(page_sizes()),
        index_fields=draw(index_fields_for(schema)),
    )
