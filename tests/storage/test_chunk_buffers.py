"""Block-local cold reads beyond memory take fixed-width columns from whole chunks in the
reader's own buffers (mrecord.storage.chunk_buffers):

- the values are exactly those of the map's path, for any ids (repeats, any order) and
  for MindDataset in every shuffle mode;
- each chunk is read once however many threads need it at once, and what is held stays
  within the capacity;
- a damaged chunk raises ChecksumError naming its page and field, never wrong values;
- reads with a bytes column in file order, spread over their chunks (a random order), or
  over more chunks than the buffers hold keep the map's path; fixed-width and
  variable-shape columns in file order read each chunk whole once and hold only the last
  page's for the next read (variable-shape values: slices of one copy of each page's
  data, never of the buffers).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import mrecord.reader.dataset_reader as dataset_reader
import mrecord.storage.chunk_buffers as chunk_buffers
import mrecord.storage.readahead as readahead
from mrecord import DatasetReader, FileWriter, MindDataset, Shuffle
from mrecord.errors import ChecksumError
from mrecord.reader.ragged import GROUPED_MIN_ROWS
from mrecord.storage.chunk_buffers import ChunkBuffers, buffer_capacity
from mrecord.storage.probe import StorageProfile
from mrecord.storage.verified import clear_verified
from tests.sweeping import chunk_preads

ROWS = 600
MIN_PAGE = 1 << 10  # the smallest page: ~11 rows, many chunks a shard


def _blob(i: int) -> bytes:
    return i.to_bytes(4, "little") * (i % 7) + bytes([i % 251]) * (i % 13)


def _pts(i: int) -> np.ndarray:
    return np.arange(2 * (i % 5), dtype=np.float32).reshape(-1, 2) + i


def _row(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "vec": np.arange(4, dtype=np.float32) + i,
        "flag": bool(i % 3 == 0),
        "label": i % 10,
        "blob": _blob(i),
        "pts": _pts(i),
    }


SCHEMA = {
    "id": {"type": "int64"},
    "vec": {"type": "float32", "shape": [4]},
    "flag": {"type": "bool"},
    "label": {"type": "int32"},
    "blob": {"type": "bytes"},
    "pts": {"type": "float32", "shape": [-1, 2]},
}
FIXED = ["id", "vec", "flag", "label"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("buffers")
    with FileWriter(folder / "t.mrecord", shard_num=3) as writer:
        writer.add_schema(SCHEMA)
        writer.set_page_size(MIN_PAGE)  # many chunks per shard
        writer.write_raw_data([_row(i) for i in range(ROWS)])
    return str(writer.files[0])


def _beyond_memory(monkeypatch: pytest.MonkeyPatch) -> list[ChunkBuffers]:
    """Make every reader's data beyond its memory and every block cold; returns the
    buffers the readers make (to see that reads went through them)."""
    made: list[ChunkBuffers] = []
    monkeypatch.setattr(readahead, "ENABLED", True)
    monkeypatch.setattr(readahead, "_looks_warm", lambda shard, ranges: False)
    monkeypatch.setattr(DatasetReader, "_memory_budget", lambda self: 1 << 10)
    real = DatasetReader._buffers

    def buffers(self: DatasetReader) -> ChunkBuffers:
        fresh = self._chunk_buffers is None
        got = real(self)
        if fresh:
            made.append(got)
        return got

    monkeypatch.setattr(DatasetReader, "_buffers", buffers)
    return made


@pytest.fixture
def beyond(monkeypatch: pytest.MonkeyPatch) -> list[ChunkBuffers]:
    """Every reader's data beyond its memory, every block cold (see _beyond_memory)."""
    clear_verified()
    return _beyond_memory(monkeypatch)


def _expected(ids: list[int]) -> dict[str, np.ndarray]:
    rows = [_row(i) for i in ids]
    return {
        "id": np.array([r["id"] for r in rows], dtype=np.int64),
        "vec": np.array([r["vec"] for r in rows], dtype=np.float32).reshape(-1, 4),
        "flag": np.array([r["flag"] for r in rows], dtype=bool),
        "label": np.array([r["label"] for r in rows], dtype=np.int32),
    }


def _same(name: str, values: Any, ids: list[int]) -> bool:
    if name == "pts":
        return all(
            isinstance(v, np.ndarray) and v.flags.writeable and np.array_equal(v, _pts(i))
            for v, i in zip(values, ids, strict=True)
        ) and len(values) == len(ids)
    if name == "blob":
        return [bytes(v) for v in values] == [_blob(i) for i in ids]
    expected = _expected(ids)[name]
    return (
        isinstance(values, np.ndarray)
        and values.dtype == expected.dtype
        and np.array_equal(values, expected)
    )


def _window(base: int, offsets: list[int]) -> list[int]:
    return [base + k for k in offsets]


# A window of 100 rows inside the first shard (three or four pages), 40 or more rows of it
# in any order: several rows per chunk, as Shuffle.BLOCK reads.
WINDOWS = st.builds(
    _window, st.integers(0, 99), st.lists(st.integers(0, 99), min_size=40, max_size=300)
)


@settings(max_examples=30, deadline=None)
@given(
    ids=st.one_of(WINDOWS, st.lists(st.integers(0, ROWS - 1), min_size=2, max_size=300)),
    columns=st.sampled_from(
        [None, ["vec"], ["label", "id"], ["flag", "vec", "id"], ["blob"], ["blob", "label"]]
    ),
    as_arrays=st.booleans(),
)
def test_values_from_the_buffers_are_the_rows(
    files: str, ids: list[int], columns: list[str] | None, as_arrays: bool
) -> None:
    clear_verified()
    with pytest.MonkeyPatch.context() as monkeypatch:
        made = _beyond_memory(monkeypatch)
        with DatasetReader.open(files) as reader:
            block = reader.read_rows(ids, columns, bytes_as_arrays=as_arrays)
    assert list(block.columns) == (columns or list(SCHEMA))
    for name, values in block.columns.items():
        assert _same(name, values, ids), name
    if "blob" in block.columns and as_arrays:
        assert all(not v.flags.writeable for v in block.columns["blob"])
    elif "blob" in block.columns:
        assert all(type(v) is bytes for v in block.columns["blob"])
    if ids != sorted(ids) and len(ids) >= 40 and max(ids) - min(ids) < 100 and max(ids) < 200:
        assert made and made[-1].kept_bytes > 0  # a window: read through the buffers


@pytest.mark.parametrize(
    "shuffle",
    [Shuffle.BLOCK, Shuffle.GLOBAL, Shuffle.PARTIAL, Shuffle.INFILE, Shuffle.FILES, False],
)
def test_minddataset_reads_the_same_rows_either_way(
    files: str,
    beyond: list[ChunkBuffers],
    shuffle: Shuffle | bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def epoch() -> list[tuple[int, bytes, bool, int, bytes, bytes]]:
        clear_verified()
        ds = MindDataset(files, shuffle=shuffle, num_parallel_workers=2, block_rows=64)
        return [
            (
                int(r["id"]),
                r["vec"].tobytes(),
                bool(r["flag"]),
                int(r["label"]),
                bytes(r["blob"]),
                r["pts"].tobytes(),
            )
            for r in ds.create_dict_iterator(num_epochs=1, output_numpy=True)
        ]

    through_buffers = epoch()
    monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)
    through_the_map = epoch()
    assert through_buffers == through_the_map
    assert sorted(r[0] for r in through_buffers) == list(range(ROWS))
    expected = {i: _row(i) for i in range(ROWS)}
    assert all(
        vec == expected[i]["vec"].tobytes()
        and label == expected[i]["label"]
        and blob == _blob(i)
        and pts == _pts(i).tobytes()
        for i, vec, _, label, blob, pts in through_buffers
    )


def _one_column(got: list[list[np.ndarray]] | None) -> list[np.ndarray] | None:
    return None if got is None else got[0]


def test_each_chunk_is_read_once_by_threads_that_need_it_at_once(
    files: str, cold: None, preads: list[tuple[int, int]]
) -> None:
    with DatasetReader.open(files) as reader:
        shard = reader.shards[0]
        col = shard.field_index("vec")
        pages = list(range(len(shard.page_starts) - 1))
        buffers = ChunkBuffers(1 << 30)
        start = threading.Barrier(4)
        got: list[list[np.ndarray] | None] = []

        def read() -> None:
            start.wait()
            got.append(_one_column(buffers.chunks(0, shard, [col], pages)))

        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        offsets = {int(shard.meta.chunks[p, col]["offset"]) for p in pages}
        reads = [offset for offset, _ in preads if offset in offsets]
        assert sorted(reads) == sorted(offsets)  # each chunk once
        for chunks in got:
            assert chunks is not None
            for page, data in zip(pages, chunks, strict=True):
                offset, length, _ = shard.chunk_place(page, col)
                assert data.tobytes() == bytes(shard.mm[offset : offset + length])
                assert not data.flags.writeable
        assert shard.verified_chunks(np.array(pages), col).all()


def test_what_is_held_stays_within_the_capacity(files: str, cold: None) -> None:
    with DatasetReader.open(files) as reader:
        shard = reader.shards[0]
        col = shard.field_index("vec")
        chunk = int(shard.meta.chunks[0, col]["length"])
        buffers = ChunkBuffers(3 * chunk)
        pages = list(range(len(shard.page_starts) - 1))
        for page in pages:
            assert buffers.chunks(0, shard, [col], [page]) is not None
            assert buffers.kept_bytes <= buffers.capacity
        assert buffers.fits(3 * chunk) and not buffers.fits(3 * chunk + 1)
        # one request larger than the capacity is still answered whole
        assert len(_one_column(buffers.chunks(0, shard, [col], pages)) or []) == len(pages)


def test_capacity_is_a_quarter_of_the_budget_within_bounds() -> None:
    assert buffer_capacity(1 << 30) == 256 << 20
    assert buffer_capacity(1 << 20) == 16 << 20
    assert buffer_capacity(64 << 30) == 512 << 20
    assert buffer_capacity(None) == 512 << 20


def test_a_damaged_chunk_raises_naming_page_and_field(tmp_path: Path, beyond: list[Any]) -> None:
    path = tmp_path / "t.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema(SCHEMA)
        writer.set_page_size(MIN_PAGE)
        writer.write_raw_data([_row(i) for i in range(200)])
    with DatasetReader.open(path) as reader:
        shard = reader.shards[0]
        col = shard.field_index("vec")
        offset, length, _ = shard.chunk_place(2, col)
    data = bytearray(path.read_bytes())
    data[offset + length // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    for verify in ("once", "always"):
        clear_verified()
        with DatasetReader.open(path, verify=verify) as reader:
            with pytest.raises(ChecksumError, match="page 2, field 'vec'"):
                reader.read_rows(np.arange(200)[::-1], ["vec"])
            with pytest.raises(ChecksumError, match="page 2, field 'vec'"):
                reader.read_rows(np.arange(200)[::-1], ["vec", "blob"])
            # the other columns of the same rows are intact and read
            labels = reader.read_rows(np.arange(200)[::-1], ["label"]).columns["label"]
            assert isinstance(labels, np.ndarray) and labels.tolist() == [
                i % 10 for i in range(199, -1, -1)
            ]


def test_file_order_and_spread_rows_keep_the_map(
    files: str, beyond: list[ChunkBuffers], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast_random = StorageProfile(device="0:0", iops=1e9, bandwidth=1.0, seconds=0.0)
    monkeypatch.setattr(dataset_reader, "probe_storage", lambda path: fast_random)
    with DatasetReader.open(files) as reader:
        ids = np.arange(ROWS)
        names = list(SCHEMA)
        assert reader._buffered_columns(ids, reader._group(ids), names) == []
        # chunks of 11 rows: one row of every 16th (under 1 per chunk) keeps the map; one
        # of every 5th (2.2 per chunk): the buffers with a bytes or variable-shape column,
        # the map for fixed-width ones alone (4 a chunk) once their chunks are verified
        # (before, they are read whole for their check anyway); every 2nd (5.5): the
        # buffers either way
        steps: tuple[tuple[int, list[str], list[str]], ...] = (
            (16, [], []),
            (5, names, []),
            (2, names, FIXED),
        )
        for step, with_bytes, _ in steps:
            spread = ids[::-1][::step].copy()
            groups = reader._group(spread)
            assert reader._buffered_columns(spread, groups, names) == with_bytes
            assert reader._buffered_columns(spread, groups, FIXED) == FIXED
        reader.read_rows(ids[::-1].copy())  # every chunk checked
        for step, _, alone in steps:
            spread = ids[::-1][::step].copy()
            assert reader._buffered_columns(spread, reader._group(spread), FIXED) == alone
        shuffled = ids[::-1].copy()
        groups = reader._group(shuffled)
        assert reader._buffered_columns(shuffled, groups, names) == names


# Sorted ids (repeats allowed: padding), dense enough to take several rows a chunk.
SORTED_RUNS = st.builds(
    lambda first, steps: sorted({first + sum(steps[: k + 1]) for k in range(len(steps))}),
    st.integers(0, ROWS // 2),
    st.lists(st.integers(0, 2), min_size=40, max_size=250),
).map(lambda ids: [i for i in ids if i < ROWS])


# Consecutive ids (shuffle=False's blocks): each page's rows a slice of its chunk.
CONSECUTIVE = st.builds(
    lambda first, n: list(range(first, min(ROWS, first + n))),
    st.integers(0, ROWS - 2),
    st.integers(2, 700),
)


@settings(max_examples=25, deadline=None)
@given(
    ids=st.one_of(SORTED_RUNS, CONSECUTIVE),
    repeats=st.lists(st.integers(0, 10_000), max_size=5),
    columns=st.sampled_from([FIXED, ["vec"], ["label", "id"], ["flag"]]),
)
def test_file_order_of_fixed_width_columns_reads_each_chunk_whole_once(
    files: str, ids: list[int], repeats: list[int], columns: list[str]
) -> None:
    """Fixed-width columns in file order beyond memory come from whole chunks, each read
    once (the last page's held for the next read), with the rows' values."""
    assume(len(ids) >= 2)
    ids = sorted(ids + [ids[r % len(ids)] for r in repeats])
    clear_verified()
    with pytest.MonkeyPatch.context() as monkeypatch:
        made = _beyond_memory(monkeypatch)
        seen = chunk_preads(monkeypatch)
        with DatasetReader.open(files) as reader:
            half = len(ids) // 2
            for sorted_ids in (np.array(ids[:half]), np.array(ids[half:])):
                groups = reader._group(sorted_ids)
                # four rows a chunk or more in every shard (fixed-width columns ask that)
                assume(all(len(pages) >= 4 * len(np.unique(pages)) for _, _, pages, _ in groups))
                assert reader._buffered_columns(sorted_ids, groups, columns) == columns
            first = reader.read_rows(ids[:half], columns)
            second = reader.read_rows(ids[half:], columns)
    for block, part in ((first, ids[:half]), (second, ids[half:])):
        for name, values in block.columns.items():
            assert _same(name, values, part), name
    assert seen and len(seen) == len(set(seen))  # a page shared by both reads: read once
    assert made and made[-1].kept_bytes > 0


def test_a_read_in_file_order_keeps_only_its_last_page_for_the_next(
    files: str, beyond: list[ChunkBuffers]
) -> None:
    """What a group cannot reclaim stays small in file order: after each read, only the
    chunks of the page the next read starts on are held (one page a shard)."""
    with DatasetReader.open(files) as reader:
        for start in range(0, ROWS, 50):
            ids = np.arange(start, min(ROWS, start + 50))
            block = reader.read_rows(ids, FIXED)
            assert all(_same(name, block.columns[name], ids.tolist()) for name in FIXED)
            held = {(shard, page) for shard, page, _ in beyond[-1]._kept}
            last = {s: int(pages[-1]) for s, _, pages, _ in reader._group(ids)}
            # one page a shard at most; of a shard this read took, the one it ended on
            assert len({shard for shard, _ in held}) == len(held), (start, held)
            assert all(last.get(shard, page) == page for shard, page in held), (start, held)
        assert beyond[-1].kept_bytes > 0


def test_file_order_with_bytes_or_sparse_keeps_the_map(
    files: str, beyond: list[ChunkBuffers]
) -> None:
    """In file order, a bytes column (streamed or read into its values directly) or rows
    spread thin over their chunks keep the map's path; variable-shape ones take the
    buffers."""
    with DatasetReader.open(files) as reader:
        ids = np.arange(ROWS)
        assert reader._buffered_columns(ids, reader._group(ids), FIXED) == FIXED
        assert reader._buffered_columns(ids, reader._group(ids), ["blob", "id"]) == []
        assert reader._buffered_columns(ids, reader._group(ids), ["pts", "id"]) == ["pts", "id"]
        # a read larger than the buffers: its values would be copies beside them, not page
        # cache the memory group can reclaim (a 100 MB group was OOM-killed so)
        reader._chunk_buffers = ChunkBuffers(4096)
        assert reader._buffered_columns(ids, reader._group(ids), ["pts", "id"]) == []
        sparse = ids[::16].copy()  # under one row a chunk
        assert reader._buffered_columns(sparse, reader._group(sparse), FIXED) == []


@pytest.mark.parametrize("grouped_from", [1, GROUPED_MIN_ROWS])
def test_variable_shape_rows_in_file_order_are_slices_of_page_copies(
    files: str, beyond: list[ChunkBuffers], monkeypatch: pytest.MonkeyPatch, grouped_from: int
) -> None:
    """Variable-shape values of reads in file order come from the buffers, each page's as
    slices of one copy of its data (not gathered by shape, however many rows): right,
    writeable, independent of each other and of the buffers, which the next reads
    reuse."""
    monkeypatch.setattr(dataset_reader, "GROUPED_MIN_ROWS", grouped_from)
    grouped: list[int] = []
    real = dataset_reader._gather_grouped

    def spy(*args: Any) -> None:
        grouped.append(1)
        real(*args)

    monkeypatch.setattr(dataset_reader, "_gather_grouped", spy)
    with DatasetReader.open(files) as reader:
        got: list[np.ndarray] = []
        for start in range(0, ROWS, 150):
            ids = np.arange(start, start + 150)
            values = reader.read_rows(ids, ["pts", "id"]).columns["pts"]
            assert _same("pts", values, ids.tolist())
            got.extend(values)
        assert beyond and beyond[-1].kept_bytes > 0  # the buffers served them
        assert not grouped
        for i, value in enumerate(got):  # still right after the buffers were reused
            np.testing.assert_array_equal(value, _pts(i))
        held = [
            chunk
            for buffers in beyond
            for chunk in buffers._kept.values()  # the chunks the buffers hold now
        ]
        for value in got[-150:]:
            assert value.size == 0 or not any(np.shares_memory(value, c) for c in held)
        got[1][...] = -1  # writing one value changes no other
        np.testing.assert_array_equal(got[2], _pts(2))


def _profile(iops: float, bandwidth: float) -> StorageProfile:
    return StorageProfile(device="0:0", iops=iops, bandwidth=bandwidth, seconds=0.0)


@pytest.mark.parametrize(
    ("profile", "one_pass"),
    [
        (None, False),  # not measured (no direct I/O): the map
        (_profile(iops=1e9, bandwidth=1.0), False),  # random reads free: the map
        (_profile(iops=200, bandwidth=150e6), True),  # an hdd: one pass over the chunks
    ],
)
def test_reads_over_more_chunks_than_the_buffers_hold(
    files: str,
    beyond: list[ChunkBuffers],
    monkeypatch: pytest.MonkeyPatch,
    profile: StorageProfile | None,
    one_pass: bool,
) -> None:
    # Chunks that still need their checksum are read whole for it anyway: one pass over
    # them, a wave at a time. Once verified, the device's profile says which is faster.
    monkeypatch.setattr(ChunkBuffers, "fits", lambda self, nbytes: False)
    probed: list[str] = []

    def probe(path: str) -> StorageProfile | None:
        probed.append(str(path))
        return profile

    monkeypatch.setattr(dataset_reader, "probe_storage", probe)
    names = list(SCHEMA)
    with DatasetReader.open(files) as reader:
        shuffled = np.arange(ROWS)[::-1].copy()
        groups = reader._group(shuffled)
        assert reader._buffered_columns(shuffled, groups, names) == names
        assert not probed  # unchecked chunks decide alone
        block = reader.read_rows(shuffled)
        for name, values in block.columns.items():
            assert _same(name, values, shuffled.tolist()), name
        assert all(
            s.verified_chunks(np.arange(len(s.page_starts) - 1), 0).all() for s in reader.shards
        )
        assert reader._buffered_columns(shuffled, groups, names) == (names if one_pass else [])
        assert probed


@settings(max_examples=25, deadline=None)
@given(
    order=st.randoms(use_true_random=False),
    rows=st.sampled_from([100, 200, 400, ROWS]),  # whole shards of 200 rows, or half of one
    capacity=st.integers(1, 6000),
    columns=st.sampled_from([None, ["vec", "id"], ["blob"], ["blob", "flag"], ["pts", "label"]]),
    as_arrays=st.booleans(),
)
def test_a_read_in_waves_gives_the_rows_and_reads_each_chunk_once(
    files: str,
    order: Any,
    rows: int,
    capacity: int,
    columns: list[str] | None,
    as_arrays: bool,
) -> None:
    ids = list(range(rows))
    order.shuffle(ids)
    assume(ids != sorted(ids))  # file order streams through the map
    clear_verified()
    with pytest.MonkeyPatch.context() as monkeypatch:
        _beyond_memory(monkeypatch)
        seen = chunk_preads(monkeypatch)
        with DatasetReader.open(files) as reader:
            reader._chunk_buffers = ChunkBuffers(capacity)  # waves of a chunk or a few
            names = columns or list(SCHEMA)
            assert reader._buffered_columns(np.array(ids), reader._group(np.array(ids)), names)
            block = reader.read_rows(ids, columns, bytes_as_arrays=as_arrays)
    for name, values in block.columns.items():
        assert _same(name, values, ids), name
    assert seen and len(seen) == len(set(seen))  # one pass: no chunk read twice


def test_waves_cover_the_sizes_in_order_within_the_limit() -> None:
    assert list(dataset_reader._waves([3, 3, 3, 3], 6)) == [(0, 2), (2, 4)]
    assert list(dataset_reader._waves([3, 3, 3], 5)) == [(0, 1), (1, 2), (2, 3)]
    assert list(dataset_reader._waves([9, 1, 1], 5)) == [(0, 1), (1, 3)]  # one over alone
    assert list(dataset_reader._waves([], 5)) == []
    assert list(dataset_reader._waves([1, 2, 3], 100)) == [(0, 3)]


def test_one_pass_against_requests_by_the_profile() -> None:
    hdd, nvme = _profile(iops=200, bandwidth=150e6), _profile(iops=16_000, bandwidth=1.5e9)
    # 8,192 random rows of 3 columns, or 300 MB of chunks
    assert hdd.requests_seconds(3 * 8192) == pytest.approx(122.88)
    assert hdd.pass_seconds(300_000_000) == pytest.approx(2.0)
    assert nvme.requests_seconds(3 * 8192) == pytest.approx(1.536)
    assert nvme.pass_seconds(300_000_000) == pytest.approx(0.2)


def test_checked_chunks_take_one_pass_where_the_profile_says_ten_times_faster(
    files: str, beyond: list[ChunkBuffers], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ChunkBuffers, "fits", lambda self, nbytes: False)
    with DatasetReader.open(files) as reader:
        ids = np.arange(ROWS)[::-1].copy()
        reader.read_rows(ids)  # every chunk checked
        groups = reader._group(ids)
        nbytes = sum(int(s.meta.chunks["length"][:, 0].sum()) for s in reader.shards)
        for speedup, one_pass in ((10.0, True), (9.9, False), (60.0, True), (0.5, False)):
            # one pass modelled at 1 s, the rows' requests at `speedup` s
            profile = _profile(iops=ROWS / speedup, bandwidth=float(nbytes))
            monkeypatch.setattr(dataset_reader, "probe_storage", lambda path, p=profile: p)
            got = reader._buffered_columns(ids, groups, ["id"])
            assert got == (["id"] if one_pass else []), speedup
        block = reader.read_rows(ids, ["id"])
        assert np.array_equal(block.columns["id"], ids)


def test_a_pages_chunks_next_to_each_other_are_one_piece() -> None:
    pieces = chunk_buffers._pieces
    # page 0's three chunks 16 bytes apart (their framing), page 1's two after
    chunks = [(0, 2), (1, 0), (0, 0), (0, 1), (1, 1)]
    places = [(300, 100, 0), (500, 50, 0), (0, 100, 0), (116, 168, 0), (566, 10, 0)]
    assert pieces(chunks, places) == [[2, 3, 0], [1, 4]]
    # a gap wider than a page splits a page's chunks; another page never joins
    far = [(0, 100, 0), (100 + 4097, 10, 0)]
    assert pieces([(0, 0), (0, 1)], far) == [[0], [1]]
    assert pieces([(0, 0), (1, 0)], [(0, 100, 0), (100, 10, 0)]) == [[0], [1]]


def test_each_pages_chunks_come_with_one_pread(
    files: str, cold: None, preads: list[tuple[int, int]]
) -> None:
    with DatasetReader.open(files) as reader:
        shard = reader.shards[0]
        cols = [shard.field_index(name) for name in SCHEMA]
        pages = list(range(len(shard.page_starts) - 1))
        got = ChunkBuffers(1 << 30).chunks(0, shard, cols, pages)
        assert got is not None
        for col, chunks in zip(cols, got, strict=True):
            for page, data in zip(pages, chunks, strict=True):
                offset, length, _ = shard.chunk_place(page, col)
                assert data.tobytes() == bytes(shard.mm[offset : offset + length])
                assert not data.flags.writeable
        firsts = {min(shard.chunk_place(page, col)[0] for col in cols) for page in pages}
        assert sorted(offset for offset, _ in preads) == sorted(firsts)  # one a page


def test_chunks_not_kept_are_read_and_leave_nothing_held(files: str, cold: None) -> None:
    with DatasetReader.open(files) as reader:
        shard = reader.shards[0]
        cols = [shard.field_index(name) for name in ("pts", "label")]
        pages = list(range(len(shard.page_starts) - 1))
        buffers = ChunkBuffers(1 << 30)
        got = buffers.chunks(0, shard, cols, pages, keep=False)
        assert got is not None and [len(chunks) for chunks in got] == [len(pages)] * 2
        assert buffers.kept_bytes == 0
        assert buffers.chunks(0, shard, cols, pages) is not None
        assert buffers.kept_bytes == sum(
            shard.chunk_place(page, col)[1] for page in pages for col in cols
        )


def test_a_window_read_takes_whole_chunks_however_few_rows_each(
    files: str, beyond: list[ChunkBuffers]
) -> None:
    """A read the caller marks as a block shuffle's ``window`` (its next reads take the
    other rows of the same chunks) goes through the buffers even with fewer rows per
    chunk than a read must take to be told local (1.2 here, under 1.5): measured on an
    hdd-like volume, 2.4 GB of images in a 763 MB group, a few of each epoch's 241-row
    BLOCK reads took 1.47 rows a chunk and read every value with a request of its own,
    seconds each. Without the mark the same read keeps the direct reads."""
    with DatasetReader.open(files) as reader:
        starts = reader.shards[0].page_starts_list
        picked = [starts[p] for p in range(10)] + [starts[p] + 1 for p in (0, 5)]
        ids = np.array(picked[::-1])
        names = list(SCHEMA)
        groups = reader._group(ids)
        assert reader._buffered_columns(ids, groups, names) == []
        assert reader._buffered_columns(ids, groups, names, window=True) == names
        block = reader.read_rows(ids, window=True)
        assert beyond and beyond[-1].kept_bytes > 0  # read through the buffers
    for name, values in block.columns.items():
        assert _same(name, values, ids.tolist()), name


@pytest.mark.parametrize("shuffle", [Shuffle.BLOCK, Shuffle.GLOBAL])
def test_minddataset_marks_its_block_shuffle_reads_as_windows(
    files: str, beyond: list[ChunkBuffers], monkeypatch: pytest.MonkeyPatch, shuffle: Shuffle
) -> None:
    """MindDataset tells its reader which reads are a block shuffle's windows: every read
    of a BLOCK epoch, none of a GLOBAL one; every row comes once either way."""
    marks: list[bool] = []
    real = DatasetReader.read_rows

    def spy(self: DatasetReader, ids: Any, columns: Any = None, **kwargs: Any) -> Any:
        marks.append(bool(kwargs.get("window", False)))
        return real(self, ids, columns, **kwargs)

    monkeypatch.setattr(DatasetReader, "read_rows", spy)
    ds = MindDataset(files, ["id"], shuffle=shuffle, num_parallel_workers=2, block_rows=64)
    got = sorted(int(r[0]) for r in ds.create_tuple_iterator(num_epochs=1, output_numpy=True))
    assert got == list(range(ROWS))
    assert marks and set(marks) == {shuffle is Shuffle.BLOCK}


@pytest.fixture(scope="module")
def one_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The rows in a single shard: a read is one group, in the read's order."""
    folder = tmp_path_factory.mktemp("one")
    with FileWriter(folder / "t.mrecord") as writer:
        writer.add_schema(SCHEMA)
        writer.set_page_size(MIN_PAGE)
        writer.write_raw_data([_row(i) for i in range(ROWS)])
    return str(writer.files[0])


@settings(max_examples=20, deadline=None)
@given(
    ids=st.one_of(WINDOWS, st.lists(st.integers(0, ROWS - 1), min_size=2, max_size=300)),
    as_arrays=st.booleans(),
)
def test_a_single_files_reads_from_the_buffers_are_the_rows_and_their_own(
    one_file: str, ids: list[int], as_arrays: bool
) -> None:
    """A read of one file is answered with the arrays and lists made for it from the
    buffers (no copy into place): the rows, and nothing shared with the next read."""
    clear_verified()
    with pytest.MonkeyPatch.context() as monkeypatch:
        _beyond_memory(monkeypatch)
        with DatasetReader.open(one_file) as reader:
            first = reader.read_rows(ids, bytes_as_arrays=as_arrays)
            second = reader.read_rows(ids, bytes_as_arrays=as_arrays)
    for block in (first, second):
        for name, values in block.columns.items():
            assert _same(name, values, ids), name
    for name in ("id", "vec", "flag", "label"):
        a, b = first.columns[name], second.columns[name]
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
        assert a.flags.writeable and not np.shares_memory(a, b)
    assert first.columns["pts"] is not second.columns["pts"]
