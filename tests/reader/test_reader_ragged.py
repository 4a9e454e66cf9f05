"""Variable-shape columns read many rows at a time (``mrecord.reader.ragged``): the same
values as written, one writeable array per value that shares memory with nothing, for
any ids (repeats, any order), any shapes (empty, big), plain and compressed chunks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord import FileWriter
from mrecord.format import shape_groups
from mrecord.format.chunks import DecodedVarChunk
from mrecord.format.schema import parse_schema
from mrecord.reader import dataset_reader, ragged
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.reader.ragged import gather_by_shape

shapes = st.lists(
    st.tuples(st.integers(0, 40), st.sampled_from([0, 1, 3, 700])), min_size=1, max_size=60
)


@st.composite
def column_shapes(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, ...]]]:
    """A column's schema shape and its rows' shapes: rank 1 to 3, the dimensions after the
    first fixed by the schema (every row alike: each value is a run of rows of one array
    over the page) or free (rows differ after the first dimension too)."""
    rank = draw(st.integers(1, 3))
    fixed = draw(st.booleans())
    trailing = st.lists(st.sampled_from([0, 1, 2, 3, 5]), min_size=rank - 1, max_size=rank - 1)
    common = tuple(draw(trailing))
    rows = draw(
        st.lists(
            st.tuples(st.integers(0, 40), trailing if not fixed else st.just(list(common))),
            min_size=1,
            max_size=60,
        )
    )
    schema_shape = [-1, *common] if fixed else [-1] * rank
    return schema_shape, [(k, *rest) for k, rest in rows]


def _counting_gathers() -> tuple[list[int], Callable[..., None]]:
    """A stand-in for the reader's by-shape gather that counts its calls."""
    calls: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        shape_groups.values_by_shape(*args, **kwargs)

    return calls, counting


@settings(max_examples=40, deadline=None)
@given(
    column=st.one_of(
        shapes.map(lambda rows: ([-1, -1], [tuple(r) for r in rows])), column_shapes()
    ),
    dtype=st.sampled_from(["float32", "int64", "uint8", "float64"]),
    compression=st.sampled_from([None, "zstd"]),
    grouped_from=st.sampled_from([1, ragged.GROUPED_MIN_ROWS]),
    data=st.data(),
)
def test_read_rows_gives_every_value_as_its_own_array(
    tmp_path_factory: pytest.TempPathFactory,
    column: tuple[list[int], list[tuple[int, ...]]],
    dtype: str,
    compression: str | None,
    grouped_from: int,
    data: st.DataObject,
) -> None:
    """``grouped_from=1`` lets even small calls gather their sparse pages by shape (a
    real reader does so from GROUPED_MIN_ROWS rows on); the default keeps them row by row.
    Columns of rank 1 to 3, their later dimensions fixed by the schema or free."""
    schema_shape, row_shapes = column
    path = tmp_path_factory.mktemp("ragged") / "ds"
    rng = np.random.default_rng(len(row_shapes))
    values = [(rng.random(s) * 100).astype(dtype) for s in row_shapes]
    field: dict[str, object] = {"type": dtype, "shape": schema_shape}
    if compression:
        field["compression"] = compression
    with FileWriter(path) as writer:
        writer.add_schema({"a": field, "i": {"type": "int32"}})
        writer.set_page_size(2048)  # several pages, some rows bigger than a page
        writer.write_raw_data({"a": values, "i": np.arange(len(values), dtype=np.int32)})
    ids = data.draw(st.lists(st.integers(0, len(values) - 1), max_size=80))
    with (
        mock.patch.object(dataset_reader, "GROUPED_MIN_ROWS", grouped_from),
        DatasetReader.open(path) as reader,
    ):
        got = reader.read_rows(ids).columns["a"]
        assert isinstance(got, list) and len(got) == len(ids)
        file_map = reader.shards[0].file_bytes
        for k, (i, value) in enumerate(zip(ids, got, strict=True)):
            assert isinstance(value, np.ndarray) and value.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(value, values[i])
            assert value.flags.writeable
            assert not np.shares_memory(value, file_map)
            for other in got[:k]:
                assert not np.shares_memory(value, other)
        if got:
            got[0][...] = 0 if got[0].size else got[0]  # writing one value changes no other
            again = reader.read_rows(ids).columns["a"]
            assert isinstance(again, list)
            for i, value in zip(ids[1:], again[1:], strict=True):
                np.testing.assert_array_equal(value, values[i])


def test_unaligned_values_are_gathered_byte_by_byte() -> None:
    """A chunk whose data starts at an offset that is not a multiple of the item size."""
    schema = parse_schema({"a": {"type": "float32", "shape": [-1, 2]}})
    field = schema["a"]
    rows = [np.arange(2 * k, dtype=np.float32).reshape(k, 2) + 10 * k for k in (1, 3, 1, 2)]
    data = b"".join(r.tobytes() for r in rows)
    offsets = np.cumsum([0, *(r.nbytes for r in rows)]).tolist()
    head = DecodedVarChunk(offsets, np.array([r.shape for r in rows], dtype=np.uint64), 0)
    file_bytes = np.frombuffer(b"\x00" * 3 + data, dtype=np.uint8)  # data at offset 3
    result: list[object] = [None] * 5
    slots = np.array([2, 0, 3, 1, 2])
    gather_by_shape(field, file_bytes, [(3, head, np.arange(5), slots)], result)
    for slot, value in zip(slots.tolist(), result, strict=True):
        assert isinstance(value, np.ndarray)
        np.testing.assert_array_equal(value, rows[slot])


def test_close_releases_the_map_after_a_grouped_read(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The shard's own whole-file view (used by the grouped gather) must not keep the
    memory map open after ``close()`` (the values returned are copies).

    The ids are sparse (one row in 5 of 6,000: 1,200 ids, over the grouped minimum of
    1,024), so few rows of each page are wanted and the read really goes through the
    grouped, by-shape gather (checked below)."""
    path = tmp_path_factory.mktemp("close") / "ds"
    with FileWriter(path) as writer:
        writer.add_schema({"a": {"type": "float32", "shape": [-1, 3]}})
        writer.write_raw_data({"a": [np.zeros((i % 5 + 1, 3), np.float32) for i in range(6000)]})
    calls, counting = _counting_gathers()
    reader = DatasetReader.open(path)
    with mock.patch.object(dataset_reader, "values_by_shape", counting):
        # kept: the values must not pin the map
        values = reader.read_rows(np.arange(0, 6000, 5)).columns["a"]
    assert calls, "the grouped (by-shape) gather was not used"
    shard = reader.shards[0]
    reader.close()
    assert shard.mm.closed
    assert isinstance(values, list) and values[7].shape == (35 % 5 + 1, 3)


def test_a_big_sparse_read_is_gathered_by_shape(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """1,100 random ids (repeats included) of 6,000 small rows: few rows of each page are
    wanted, so the call goes through the by-shape gather; values as written, each its own
    writeable array."""
    path = tmp_path_factory.mktemp("sparse") / "ds"
    rng = np.random.default_rng(7)
    values = [rng.random((int(k), 3)).astype(np.float32) for k in rng.integers(0, 9, 6000)]
    with FileWriter(path) as writer:
        writer.add_schema({"a": {"type": "float32", "shape": [-1, 3]}})
        writer.write_raw_data({"a": values})
    ids = rng.integers(0, 6000, 1100)
    ids[:50] = ids[50:100]  # some rows asked twice
    calls, counting = _counting_gathers()
    with (
        mock.patch.object(dataset_reader, "values_by_shape", counting),
        DatasetReader.open(path) as reader,
    ):
        got = reader.read_rows(ids).columns["a"]
    assert calls, "the by-shape gather was not used"
    assert isinstance(got, list)
    for i, value in zip(ids.tolist(), got, strict=True):
        np.testing.assert_array_equal(value, values[i])
        assert value.flags.writeable
    for k in range(50):  # the same row asked twice: two arrays
        assert not np.shares_memory(got[k], got[k + 50])


def test_a_big_read_of_mostly_whole_pages_copies_its_few_other_rows_one_by_one(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A read of many rows (over the grouped minimum) where most pages are wanted whole and
    a few other pages give a row or two: those few rows are copied one by one (too few
    to group by shape), each value as written, its own writeable array."""
    path = tmp_path_factory.mktemp("dense") / "ds"
    rng = np.random.default_rng(3)
    values = [rng.random((int(k), 3)).astype(np.float32) for k in rng.integers(0, 9, 6000)]
    with FileWriter(path) as writer:
        writer.add_schema({"a": {"type": "float32", "shape": [-1, 3]}})
        writer.set_page_size(4096)  # many pages
        writer.write_raw_data({"a": values})
    ids = np.concatenate([np.arange(0, 3000), [4000, 5500, 5999, 4000]])[::-1].copy()
    calls, counting = _counting_gathers()
    with (
        mock.patch.object(dataset_reader, "values_by_shape", counting),
        DatasetReader.open(path) as reader,
    ):
        assert reader.shards[0].meta.num_pages > 10
        got = reader.read_rows(ids).columns["a"]
    assert not calls, "a few sparse rows were grouped by shape"
    assert isinstance(got, list)
    for i, value in zip(ids.tolist(), got, strict=True):
        np.testing.assert_array_equal(value, values[i])
        assert value.flags.writeable
    assert not np.shares_memory(got[0], got[3])  # row 4000 asked twice: two arrays


@settings(max_examples=40, deadline=None)
@given(
    chunk_rows=st.lists(
        st.lists(st.integers(0, 5), min_size=1, max_size=12), min_size=1, max_size=6
    ),
    picks=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), max_size=60),
    reverse=st.booleans(),
)
def test_values_of_chunks_in_separate_buffers_are_gathered_through_one_spanning_view(
    chunk_rows: list[list[int]], picks: list[tuple[int, int]], reverse: bool
) -> None:
    """``spanning_view`` over chunks that lie in buffers of their own (at any addresses,
    in any order) gives the same values as the chunks read one by one: each chunk's bytes
    at its offset in the view, the view shares their memory and copies nothing."""
    field = parse_schema({"a": {"type": "int16", "shape": [-1, 3]}})["a"]
    chunks: list[np.ndarray] = []
    heads: list[DecodedVarChunk] = []
    values: list[list[np.ndarray]] = []
    for c, lengths in enumerate(chunk_rows):
        rows = [
            np.arange(3 * k, dtype=np.int16).reshape(k, 3) + 100 * c + 7 * i
            for i, k in enumerate(lengths)
        ]
        padding = b"\xff" * (c % 3)  # data at an odd offset in some chunks
        data = padding + b"".join(r.tobytes() for r in rows)
        chunks.append(np.frombuffer(bytearray(data), dtype=np.uint8))  # a buffer of its own
        offsets = np.cumsum([0, *(r.nbytes for r in rows)]).tolist()
        heads.append(
            DecodedVarChunk(
                offsets, np.array([r.shape for r in rows], dtype=np.uint64), len(padding)
            )
        )
        values.append(rows)
    parts = chunks[::-1] if reverse else chunks
    span, offsets = ragged.spanning_view(parts)
    for part, at in zip(parts, offsets, strict=True):
        np.testing.assert_array_equal(span[at : at + len(part)], part)
        assert not len(part) or np.shares_memory(span[at : at + len(part)], part)
    assert not span.flags.owndata and not span.flags.writeable
    wanted = [(c % len(chunks), i) for c, i in picks]
    wanted = [(c, i % len(values[c])) for c, i in wanted]
    result: list[Any] = [None] * len(wanted)
    by_part = {id(part): at for part, at in zip(parts, offsets, strict=True)}
    pages = []
    for c in range(len(chunks)):
        mine = [k for k, (cc, _) in enumerate(wanted) if cc == c]
        slots = np.array([wanted[k][1] for k in mine], dtype=np.int64)
        pages.append((by_part[id(chunks[c])], heads[c], np.array(mine, dtype=np.int64), slots))
    gather_by_shape(field, span, pages, result)
    for (c, i), value in zip(wanted, result, strict=True):
        np.testing.assert_array_equal(value, values[c][i])
        assert value.flags.writeable and not np.shares_memory(value, chunks[c])
