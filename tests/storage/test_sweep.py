"""A random order over small rows beyond memory is read a window at a time, each window in
one pass over the columns' chunks (``DatasetReader.sweep_rows``, ``read_rows(sweep=True)``,
``RandomAccessSource._iter_swept``):

- a swept read gives exactly the rows of a plain one, reading each chunk once;
- ``sweep_rows`` sweeps only where it can and where it pays: local files larger than
  memory, fixed-width and variable-shape columns stored plainly, a device whose requests
  cost more than a pass; its window stays within its share of the memory budget;
- ``MindDataset`` yields exactly what it yields without sweeping, in every shuffle mode,
  with sharding, padding and a resume in the middle of a window; a file-order epoch and
  a block shuffle's windows never sweep;
- a damaged chunk in a window raises ``ChecksumError`` after the same rows a block read
  gives, or, with ``on_error="skip"``, loses only its own rows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mrecord.reader.dataset_reader as dataset_reader
import mrecord.reader.ragged as ragged
import mrecord.storage.chunk_buffers as chunk_buffers
from mrecord import DatasetReader, FileWriter, MindDataset, Shuffle
from mrecord.errors import ChecksumError
from mrecord.format.chunks import decode_var
from mrecord.storage.probe import StorageProfile
from mrecord.storage.verified import clear_verified
from tests.sweeping import SLOW_REQUESTS, chunk_preads, column_bytes, profile, sweeping

ROWS = 900
MIN_PAGE = 1 << 10  # the smallest page: many chunks a shard
WINDOW_ROWS = 150  # the window the tests' budget gives (see _budget_for)


def _pts(i: int) -> np.ndarray:
    return np.arange(3 * (i % 4), dtype=np.float32).reshape(-1, 3) + i


def _row(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "vec": np.arange(4, dtype=np.float32) + i,
        "label": i % 10,
        "pts": _pts(i),
        "blob": bytes([i % 251]) * (i % 9),
        "name": f"row-{i}" + "é漢" * (i % 3),  # multi-byte UTF-8 too
    }


SCHEMA = {
    "id": {"type": "int64"},
    "vec": {"type": "float32", "shape": [4]},
    "label": {"type": "int32"},
    "pts": {"type": "float32", "shape": [-1, 3]},
    "blob": {"type": "bytes"},
    "name": {"type": "string"},
}
SWEPT = ["id", "vec", "label", "pts"]  # the columns a sweep can read


def _write(folder: Path, compress: bool = False) -> str:
    with FileWriter(folder / "t.mrecord", shard_num=2) as writer:
        writer.add_schema(SCHEMA)
        writer.set_page_size(MIN_PAGE)
        if compress:
            writer.set_compression("zstd")
        writer.write_raw_data([_row(i) for i in range(ROWS)])
    return str(writer.files[0])


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _write(tmp_path_factory.mktemp("sweep"))


def _per_row(files: str, columns: list[str]) -> int:
    """What ``sweep_rows`` counts a row of these columns at (its rule, restated): the
    values' bytes, and for a variable-shape value its shape and an array object."""
    per_row = dataset_reader._SWEEP_ROW_BYTES
    sizes = {"id": 8, "vec": 16, "label": 4}
    for name in columns:
        if name in sizes:
            per_row += sizes[name]
        else:  # pts: its chunks less their offsets (8 bytes a row), an array object
            with DatasetReader.open(files) as reader:
                stored = sum(
                    int(s.meta.chunks["raw_length"][:, s.field_index(name)].sum())
                    for s in reader.shards
                )
            per_row += (stored - 8 * ROWS) // ROWS + dataset_reader._SWEEP_ARRAY_BYTES
    return per_row


def _budget_for(files: str, columns: list[str], rows: int = WINDOW_ROWS) -> int:
    return rows * dataset_reader._SWEEP_WINDOWS * _per_row(files, columns)


def _same(name: str, values: Any, ids: list[int]) -> bool:
    if name == "pts":
        return len(values) == len(ids) and all(
            isinstance(v, np.ndarray)
            and v.flags.writeable
            and v.dtype == np.float32
            and np.array_equal(v, _pts(i))
            for v, i in zip(values, ids, strict=True)
        )
    if name == "vec":
        return np.array_equal(values, np.array([_row(i)["vec"] for i in ids]).reshape(-1, 4))
    expected = np.array([_row(i)[name] for i in ids])
    return bool(np.array_equal(np.asarray(values), expected))


# -- the reader -----------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    ids=st.lists(st.integers(0, ROWS - 1), min_size=2, max_size=1200),
    columns=st.sampled_from(
        [
            SWEPT,
            ["vec"],
            ["pts"],
            ["pts", "label"],
            ["label", "id"],
            ["name"],
            ["id", "name"],
            ["blob", "name"],
        ]
    ),
    capacity=st.integers(1, 20_000),
)
def test_a_swept_read_gives_the_rows_reading_each_chunk_once(
    files: str, ids: list[int], columns: list[str], capacity: int
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        sweeping(monkeypatch, budget=1 << 10)
        seen = chunk_preads(monkeypatch)
        with DatasetReader.open(files) as reader:
            reader._chunk_buffers = chunk_buffers.ChunkBuffers(capacity)  # waves of any size
            block = reader.read_rows(ids, columns, sweep=True)
    assert list(block.columns) == columns
    for name, values in block.columns.items():
        assert _same(name, values, ids), name
    if ids != sorted(ids):
        assert seen  # through whole chunks, not the map
    assert len(seen) == len(set(seen))  # one pass: no chunk read twice


def test_many_rows_of_a_variable_shape_column_come_as_separate_arrays(files: str) -> None:
    """A sweep's wave of many variable-shape rows is gathered a shape at a time: each
    value is still its own writeable array, a row asked twice two arrays."""
    ids = np.random.default_rng(7).integers(0, ROWS, 3000)
    with pytest.MonkeyPatch.context() as monkeypatch:
        sweeping(monkeypatch, budget=1 << 10)
        with DatasetReader.open(files) as reader:
            values = reader.read_rows(ids, ["pts"], sweep=True).columns["pts"]
    assert _same("pts", values, ids.tolist())
    first, again = (int(k) for k in np.flatnonzero(ids == ids[0])[:2])
    values[first][...] = -1
    assert np.array_equal(values[again], _pts(int(ids[0])))  # no shared memory


def test_sweep_rows_is_a_share_of_the_budget(files: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with DatasetReader.open(files) as reader:
        for columns in (["id"], ["vec", "label"], ["pts"], SWEPT):
            for rows in (2, 100, 500):
                sweeping(monkeypatch, budget=_budget_for(files, columns, rows))
                assert reader.sweep_rows(columns) == rows, (columns, rows)
        sweeping(monkeypatch, budget=_budget_for(files, ["id"], 10 * ROWS))
        assert reader.sweep_rows(["id"]) == ROWS  # never more than the dataset
        sweeping(monkeypatch, budget=_budget_for(files, ["id"], 1))
        assert reader.sweep_rows(["id"]) == 0  # a window of one row is no sweep


def test_sweep_rows_only_where_a_pass_pays(files: str, monkeypatch: pytest.MonkeyPatch) -> None:
    budget = _budget_for(files, ["id", "label"])
    with DatasetReader.open(files) as reader:
        nbytes = column_bytes(reader, ["id", "label"])
        requests = 2 * WINDOW_ROWS
        threshold = dataset_reader._SWEEP_SPEEDUP
        assert 1.0 < threshold <= 4.0  # a pass a quarter of the requests' time always pays
        cases = ((threshold, True), (0.99 * threshold, False), (100.0, True), (1.0, False))
        for speedup, sweeps in cases:
            # one pass modelled at 1 s, the window's requests at `speedup` s
            device = profile(iops=requests / speedup, bandwidth=float(nbytes))
            sweeping(monkeypatch, budget, device)
            assert bool(reader.sweep_rows(["id", "label"])) is sweeps, speedup
        sweeping(monkeypatch, budget, device=None)  # the device not measured
        assert reader.sweep_rows(["id", "label"]) == 0


def test_sweep_rows_counts_the_heads_rows_one_by_one_parse_again(
    files: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of a variable-shape column read one by one each need their page's head: where
    the head cache cannot keep the heads (it keeps a tenth of the memory budget), most
    rows read and parse theirs again, a request and the head's bytes. Weighed as a
    request a row alone, 2M variable-shape rows in a 125 MB group were read one by one at
    4.9K rows/s (370K major faults for 200K rows) where a sweep read 22K."""
    budget = _budget_for(files, ["pts"])
    with DatasetReader.open(files) as reader:
        nbytes = column_bytes(reader, ["pts"])
        # the window's requests alone at 0.9 of what a pass must save: no sweep for them
        iops = WINDOW_ROWS / (0.9 * dataset_reader._SWEEP_SPEEDUP)
        sweeping(monkeypatch, budget, profile(iops=iops, bandwidth=float(nbytes)))
        monkeypatch.setattr(dataset_reader, "head_cache_bytes", lambda: 1 << 40)
        assert reader.sweep_rows(["pts"]) == 0  # every head kept: a request a row
        monkeypatch.setattr(dataset_reader, "head_cache_bytes", lambda: 0)
        assert reader.sweep_rows(["pts"]) == WINDOW_ROWS  # a head read again a row too


def test_sweep_rows_only_for_columns_a_pass_can_read(
    files: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget = _budget_for(files, SWEPT)
    sweeping(monkeypatch, budget)
    with DatasetReader.open(files) as reader:
        assert reader.sweep_rows(SWEPT) > 0
        # small bytes values too (copies, not views of the pass's buffers): 6M 40-byte
        # values read at random in a 250 MB group, 41.8K rows/s one by one
        assert reader.sweep_rows(["id", "blob"]) > 0
        # strings too: 6M file names read at random in a 250 MB group faulted on the map
        # (12.6K rows/s, memory.failcnt 555K)
        assert reader.sweep_rows(["name"]) > 0
        assert reader.sweep_rows(["id", "name"]) > 0
        monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)
        assert reader.sweep_rows(SWEPT) == 0  # MRECORD_CHUNK_BUFFERS=0
        monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", True)
        monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: False)
        assert reader.sweep_rows(SWEPT) == 0  # the data fits in memory
    with DatasetReader.open(_write(tmp_path, compress=True)) as compressed:
        monkeypatch.setattr(DatasetReader, "_beyond_memory", lambda self: True)
        assert compressed.sweep_rows(["vec"]) == 0  # compressed chunks keep the map


# -- MindDataset ----------------------------------------------------------------------------


def _epoch(ds: MindDataset, epochs: int = 1) -> list[list[tuple[int, bytes, bytes]]]:
    out: list[list[tuple[int, bytes, bytes]]] = [[] for _ in range(epochs)]
    it: Iterator[dict[str, Any]] = ds.create_dict_iterator(num_epochs=epochs, output_numpy=True)
    per_epoch = ds.get_dataset_size()
    for k, row in enumerate(it):
        out[k // per_epoch].append((int(row["id"]), row["vec"].tobytes(), row["pts"].tobytes()))
    return out


CASES = st.fixed_dictionaries(
    {
        "shuffle": st.sampled_from([Shuffle.GLOBAL, Shuffle.PARTIAL, Shuffle.INFILE, True]),
        "shards": st.sampled_from([None, (2, 0), (3, 2)]),
        "padded": st.booleans(),
        "workers": st.integers(1, 3),
    }
)


PADDED = ["id", "vec", "pts"]


def _dataset(files: str, case: dict[str, Any]) -> MindDataset:
    kwargs: dict[str, Any] = {"shuffle": case["shuffle"], "num_parallel_workers": case["workers"]}
    if case["shards"]:
        kwargs["num_shards"], kwargs["shard_id"] = case["shards"]
        if case["padded"]:
            kwargs["padded_sample"] = {k: v for k, v in _row(ROWS + 1).items() if k in PADDED}
            kwargs["num_padded"] = (-ROWS) % case["shards"][0] or case["shards"][0]
    return MindDataset(files, PADDED, partial_window=300, **kwargs)


@settings(max_examples=12, deadline=None)
@given(case=CASES)
def test_minddataset_yields_exactly_what_it_yields_withoutsweeping(
    files: str, case: dict[str, Any]
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        calls = sweeping(monkeypatch, _budget_for(files, ["id", "vec", "pts"]))
        swept = _epoch(_dataset(files, case), epochs=2)
        assert any(sweep and rows > 64 for rows, sweep in calls)  # read in windows
        monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)
        plain = _epoch(_dataset(files, case), epochs=2)
    assert swept == plain
    expected = {i: (_row(i)["vec"].tobytes(), _pts(i).tobytes()) for i in range(ROWS + 2)}
    assert all((vec, pts) == expected[i] for epoch in swept for i, vec, pts in epoch)


@pytest.mark.parametrize("shuffle", [False, Shuffle.BLOCK, Shuffle.FILES])
def test_file_order_and_block_windows_never_sweep(
    files: str, monkeypatch: pytest.MonkeyPatch, shuffle: Shuffle | bool
) -> None:
    calls = sweeping(monkeypatch, _budget_for(files, SWEPT))
    probed: list[str] = []

    def probe(path: str) -> StorageProfile:
        probed.append(path)
        return SLOW_REQUESTS

    monkeypatch.setattr(dataset_reader, "probe_storage", probe)
    ds = MindDataset(files, SWEPT, shuffle=shuffle, num_parallel_workers=2)
    ids = [int(r[0]) for r in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    assert sorted(ids) == list(range(ROWS))
    assert calls and not any(sweep for _, sweep in calls)
    if shuffle is not Shuffle.BLOCK:
        # Nor does it measure the device to ask whether a sweep would pay: the probe's
        # half second of reads was 8% of a file-order epoch of 8M tabular rows on a
        # throttled volume, and took its share of the throttle.
        assert probed == []


@settings(max_examples=10, deadline=None)
@given(k=st.integers(1, ROWS - 1))
def test_a_resume_inside_a_window_yields_the_rest_of_the_epoch(files: str, k: int) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        calls = sweeping(monkeypatch, _budget_for(files, SWEPT))
        full = [int(r[0]) for r in _iter(files)]
        it = _iter(files)
        head = [int(r[0]) for _, r in zip(range(k), it, strict=False)]
        state = json.loads(json.dumps(it.state_dict()))
        it.stop()
        resumed = _iter(files)
        resumed.load_state_dict(state)
        rest = [int(r[0]) for r in resumed]
        assert any(sweep for _, sweep in calls)
    assert head + rest == full
    assert sorted(full) == list(range(ROWS))


def _iter(files: str) -> Any:
    ds = MindDataset(files, SWEPT, shuffle=Shuffle.GLOBAL, num_parallel_workers=2)
    return ds.create_tuple_iterator(num_epochs=1, output_numpy=True)


def _damaged(tmp_path: Path, page: int, column: str = "vec") -> tuple[str, set[int]]:
    """A copy of the dataset with one byte of ``column``'s chunk of ``page`` (shard 0)
    flipped, and the rows of that chunk."""
    path = _write(tmp_path)
    with DatasetReader.open(path) as reader:
        shard = reader.shards[0]
        offset, length, _ = shard.chunk_place(page, shard.field_index(column))
        lost = set(range(shard.page_starts_list[page], shard.page_starts_list[page + 1]))
    with open(path, "r+b") as f:
        f.seek(offset + length // 2)
        byte = f.read(1)
        f.seek(offset + length // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    return path, lost


def _rows_until_error(ds: MindDataset) -> tuple[list[int], BaseException | None]:
    got: list[int] = []
    try:
        for row in ds.create_tuple_iterator(num_epochs=1, output_numpy=True):
            got.append(int(row[0]))
    except ChecksumError as exc:
        return got, exc
    return got, None


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_damaged_chunk_in_a_window_fails_or_skips_as_block_reads_do(
    files: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_error: str
) -> None:
    path, lost = _damaged(tmp_path, page=3)
    order = [int(r[0]) for r in _iter(files)]  # the clean dataset's epoch: same sizes, seed

    def read() -> tuple[list[int], BaseException | None]:
        clear_verified()
        ds = MindDataset(
            path, ["id", "vec"], shuffle=Shuffle.GLOBAL, num_parallel_workers=2, on_error=on_error
        )
        return _rows_until_error(ds)

    calls = sweeping(monkeypatch, _budget_for(path, ["id", "vec"]))
    swept, swept_error = read()
    assert any(sweep for _, sweep in calls)
    monkeypatch.setattr(dataset_reader, "CHUNK_BUFFERS", False)
    plain, plain_error = read()
    if on_error == "raise":
        # The rows before the damage's window come out, never a row of it; then the error.
        assert swept_error is not None and plain_error is not None
        assert "vec" in str(swept_error) and "page 3" in str(swept_error)
        assert swept == order[: len(swept)]
        assert not lost & set(swept)
        assert len(swept) < ROWS
    else:
        assert swept_error is None and plain_error is None
        assert swept == plain == [i for i in order if i not in lost]


def test_variable_shape_values_are_gathered_where_their_chunks_lie(
    files: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grouped gather indexes the chunks where the reader's buffers hold them: no
    chunk is copied on the way (laid end to end, a block shuffle's read copied its whole
    window of chunks, 9x the dataset an epoch; a reader in a 266 MB group was once
    OOM-killed by it), and the values are right."""
    seen: list[np.ndarray] = []
    real = ragged.gather_by_shape

    def spy(field: Any, file_bytes: np.ndarray, pages: Any, result: list[Any]) -> None:
        seen.append(file_bytes)
        real(field, file_bytes, pages, result)

    monkeypatch.setattr(dataset_reader, "gather_by_shape", spy)
    ids = np.random.default_rng(11).integers(0, ROWS, 4000)
    sweeping(monkeypatch, budget=1 << 10)
    with DatasetReader.open(files) as reader:
        values = reader.read_rows(ids, ["pts"], sweep=True).columns["pts"]
    assert _same("pts", values, ids.tolist())
    assert seen
    # a view of the buffers' memory, never bytes of its own (a laid copy owns its data)
    assert not any(view.flags.owndata or view.flags.writeable for view in seen)


def test_a_window_s_next_reads_parse_no_head_again(
    files: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heads a read of whole chunks parses are kept for the next reads of the same
    chunks (a block shuffle's window is read in several reads over the same chunks: each
    parsed every head again), and what is kept holds no view of the chunks' buffers."""
    clear_verified()
    parsed: list[int] = []
    real = decode_var

    def spy(field: Any, buf: Any, n_rows: int, length: int | None = None) -> Any:
        parsed.append(n_rows)
        return real(field, buf, n_rows, length)

    monkeypatch.setattr(dataset_reader, "decode_var", spy)
    rng = np.random.default_rng(3)
    sweeping(monkeypatch, budget=1 << 10)
    with DatasetReader.open(files) as reader:
        first = rng.permutation(ROWS)[: ROWS // 2]
        values = reader.read_rows(first, ["pts"], sweep=True).columns["pts"]
        assert _same("pts", values, first.tolist())
        assert parsed  # the first read parsed the heads of the chunks it took
        parsed.clear()
        again = rng.permutation(ROWS)[: ROWS // 2]
        values = reader.read_rows(again, ["pts"], sweep=True).columns["pts"]
        assert _same("pts", values, again.tolist())
        assert parsed == []
        for shard in reader.shards:
            heads = shard.cached_heads(shard.field_index("pts"))
            for page in range(shard.meta.num_pages):
                head = heads(page)
                assert head is not None and head.shapes.base is None


def test_a_short_order_is_weighed_by_its_own_rows(
    files: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few rows spread over every chunk are cheaper as requests than a pass: the rule
    weighs the window the order fills (a sampler of 10 rows of a large dataset)."""
    budget = _budget_for(files, ["id", "label"])
    with DatasetReader.open(files) as reader:
        nbytes = column_bytes(reader, ["id", "label"])
        # a pass at 1 s; 100 rows' requests (2 columns) at exactly the threshold
        iops = 2 * 100 / dataset_reader._SWEEP_SPEEDUP
        sweeping(monkeypatch, budget, profile(iops=iops, bandwidth=float(nbytes)))
        assert reader.sweep_rows(["id", "label"]) == WINDOW_ROWS
        assert reader.sweep_rows(["id", "label"], rows=100) == 100
        assert reader.sweep_rows(["id", "label"], rows=99) == 0
        assert reader.sweep_rows(["id", "label"], rows=10 * ROWS) == WINDOW_ROWS
    calls = sweeping(monkeypatch, budget, profile(iops=iops, bandwidth=float(nbytes)))
    ds = MindDataset(files, ["id", "label"], shuffle=Shuffle.GLOBAL, num_samples=50)
    got = [int(r[0]) for r in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    assert len(set(got)) == 50
    assert calls and not any(sweep for _, sweep in calls)


def test_a_sweep_asks_between_its_waves_whether_to_go_on(files: str) -> None:
    """``between_waves`` runs before every wave after the first; what it raises ends the
    read there (a run closed in the middle of an epoch does not wait for the pass)."""
    ids = np.random.default_rng(5).permutation(ROWS)
    asked: list[int] = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        sweeping(monkeypatch, budget=1 << 10)
        with DatasetReader.open(files) as reader:
            reader._chunk_buffers = chunk_buffers.ChunkBuffers(4096)  # many waves
            block = reader.read_rows(
                ids, ["id", "pts"], sweep=True, between_waves=lambda: asked.append(1)
            )
            assert _same("id", block.columns["id"], ids.tolist())
            assert _same("pts", block.columns["pts"], ids.tolist())
            assert len(asked) > 3

            class Stopped(Exception):
                pass

            def stop() -> None:
                raise Stopped

            with pytest.raises(Stopped):
                reader.read_rows(ids, ["id", "pts"], sweep=True, between_waves=stop)


def test_closing_a_run_ends_the_pass_in_flight(files: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An iterator stopped after its first rows does not wait for the next window's
    whole pass: the pass stops at its next wave."""
    sweeping(monkeypatch, _budget_for(files, ["id"], rows=ROWS // 2))
    waves: list[int] = []  # one entry a wave asked for
    real = chunk_buffers.ChunkBuffers.chunks

    def slow(self: Any, *args: Any, **kwargs: Any) -> Any:
        waves.append(1)
        time.sleep(0.02)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(chunk_buffers.ChunkBuffers, "chunks", slow)
    monkeypatch.setattr(chunk_buffers, "buffer_capacity", lambda budget: 1)
    monkeypatch.setattr(dataset_reader, "buffer_capacity", lambda budget: 1)  # a wave a chunk
    ds = MindDataset(files, ["id"], shuffle=Shuffle.GLOBAL, num_parallel_workers=1)
    it = ds.create_tuple_iterator(num_epochs=1, output_numpy=True)
    next(it)  # the first window is in; the second is being read
    it.stop()
    read = len(waves)
    with DatasetReader.open(files) as reader:
        pages = sum(len(s.page_starts) - 1 for s in reader.shards)
    assert read < 2 * pages  # the second window's pass was not read to its end
    time.sleep(0.1)
    assert len(waves) == read  # and nothing reads on once the run is closed


def test_a_damaged_chunk_read_ahead_in_a_later_wave_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass's next wave is read on a thread of its own while the rows of this one are
    taken: a damaged chunk there still raises ChecksumError in the reader, never gives
    wrong values."""
    path, lost = _damaged(tmp_path, page=30)
    ids = np.random.default_rng(2).permutation(ROWS)
    sweeping(monkeypatch, budget=1 << 10)
    with DatasetReader.open(path) as reader:
        reader._chunk_buffers = chunk_buffers.ChunkBuffers(2048)  # many waves
        with pytest.raises(ChecksumError, match="page 30"):
            reader.read_rows(ids, ["id", "vec"], sweep=True)
        kept = np.array([i for i in ids.tolist() if i not in lost])
        block = reader.read_rows(kept, ["id", "vec"], sweep=True)
    assert _same("vec", block.columns["vec"], kept.tolist())


def test_a_damaged_string_chunk_in_a_sweep_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strings come from the pass's checked chunks too: a flipped byte in one raises
    ChecksumError naming its page, never a wrong or undecodable name; the other rows
    read back."""
    path, lost = _damaged(tmp_path, page=12, column="name")
    ids = np.random.default_rng(5).permutation(ROWS)
    sweeping(monkeypatch, budget=1 << 10)
    with DatasetReader.open(path) as reader:
        with pytest.raises(ChecksumError, match="page 12"):
            reader.read_rows(ids, ["id", "name"], sweep=True)
        kept = np.array([i for i in ids.tolist() if i not in lost])
        block = reader.read_rows(kept, ["id", "name"], sweep=True)
    assert _same("name", block.columns["name"], kept.tolist())



def _root(value: np.ndarray) -> np.ndarray:
    while isinstance(value.base, np.ndarray):
        value = value.base
    return value


def test_small_bytes_values_from_the_buffers_hold_only_their_own_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bytes value taken from the reader's chunk buffers as an array (``MindDataset``'s
    ``bytes_as_arrays``) viewed its whole buffer: a random order over 6M rows of a 40-byte
    bytes column beyond memory pinned a buffer piece a row, 1.3 GB resident, and was
    OOM-killed in a 250 MB memory group. Small values are copies now."""
    path = _write(tmp_path)
    ids = np.random.default_rng(3).permutation(ROWS)[:400]
    sweeping(monkeypatch, budget=1 << 10)
    with DatasetReader.open(path) as reader:
        reader._chunk_buffers = chunk_buffers.ChunkBuffers(1 << 20)
        block = reader.read_rows(ids, ["id", "blob"], bytes_as_arrays=True, sweep=True)
    values = block.columns["blob"]
    assert [bytes(v) for v in values] == [_row(int(i))["blob"] for i in ids]
    assert all(_root(v).nbytes <= max(64, 4 * v.nbytes) for v in values)
