"""How the parsed heads of variable-shape chunks are kept (``kept_offsets``,
``kept_shapes`` in ``mrecord.format.chunks``): small, and read exactly like the file.

A ``MapDataset`` read of 256 random rows at a time over 2M rows of ``float32[-1, 3]``
(798 MB) in a 500 MB memory group, under PyTorch: the heads (61 KB a page, 48 MB in all
as 8-byte ints) did not fit the 34 MB the head cache keeps there, so half the rows read
and parsed their page's head again: 500 MB/s off the disk for 9.1K rows/s. Kept in 4-byte
offsets and 1-byte shapes (6 bytes a row), every head fits: 35.9K rows/s.
"""

from __future__ import annotations

from array import array
from pathlib import Path

import numpy as np
import pytest

import mrecord.reader.dataset_reader as dataset_reader
from mrecord import FileWriter, MindDataset, Shuffle
from mrecord.format.chunks import kept_offsets, kept_shapes
from mrecord.format.head_index import head_length
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage import verified
from mrecord.storage.verified import kept_head_bytes
from tests.sweeping import column_bytes, profile, sweeping

ROWS = 600


def _points(i: int, largest: int) -> np.ndarray:
    """Row ``i``: ``k`` points of 3 values, ``k`` up to ``largest`` (reached by row 7)."""
    k = largest if i % 97 == 7 else i % 11
    return np.arange(3 * k, dtype=np.float32).reshape(k, 3) + i


def _write(path: Path, largest: int) -> None:
    with FileWriter(path) as writer:
        writer.add_schema(
            {"pts": {"type": "float32", "shape": [-1, 3]}, "label": {"type": "int32"}}
        )
        writer.set_page_size(16 << 10)
        writer.write_raw_data(
            {"pts": [_points(i, largest) for i in range(ROWS)], "label": list(range(ROWS))}
        )


def _kept(reader: DatasetReader) -> list[object]:
    """Every head of column ``pts`` the shared cache holds for ``reader``'s shard."""
    shard = reader.shards[0]
    head_of = shard.cached_heads(shard.field_index("pts"))
    return [h for h in map(head_of, range(shard.meta.num_pages)) if h is not None]


def test_a_small_variable_shape_head_is_kept_in_a_quarter_of_its_stored_bytes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "small"
    _write(path, largest=40)
    verified.clear_verified()
    with DatasetReader.open(path) as reader:
        reader.read_rows(np.random.default_rng(0).permutation(ROWS))
        heads = _kept(reader)
        assert heads, "the read kept no head"
        for head in heads:
            rows = len(head.offsets) - 1  # type: ignore[attr-defined]
            if rows < 64:
                continue  # a list: a head of a few rows is indexed fastest that way
            offsets, shapes = head.offsets, head.shapes  # type: ignore[attr-defined]
            kept = len(offsets) * offsets.itemsize + shapes.nbytes
            # stored: 8 bytes an offset, 8 a dimension (24 a row); kept: 4 + 2
            assert kept <= 6 * rows + 8, f"{kept / rows:.1f} bytes a row"


@pytest.mark.parametrize("largest", [40, 300, 70_000])
def test_rows_read_through_kept_heads_equal_the_written_ones(tmp_path: Path, largest: int) -> None:
    """Dimensions that need 1, 2 and 4 bytes: the second read of each row finds its head
    kept, narrowed, and gives exactly what was written, through every read path."""
    path = tmp_path / f"d{largest}"
    _write(path, largest)
    verified.clear_verified()
    order = np.random.default_rng(1).permutation(ROWS)
    with DatasetReader.open(path) as reader:
        for _ in range(2):  # the first parses and keeps, the second reads the kept heads
            block = reader.read_rows(order)
            for i, got in zip(order.tolist(), block.columns["pts"], strict=True):
                np.testing.assert_array_equal(got, _points(i, largest))
                assert got.dtype == np.float32 and got.flags.writeable
            for i in (7, 8, ROWS - 1):
                np.testing.assert_array_equal(reader.read_row(i)["pts"], _points(i, largest))
        widths = {h.shapes.dtype.itemsize for h in _kept(reader)}  # type: ignore[attr-defined]
        assert widths and max(widths) == (1 if largest < 256 else 2 if largest < 65536 else 4)
    dataset = MindDataset(str(path), shuffle=Shuffle.GLOBAL)
    seen = 0
    for row in dataset.create_dict_iterator(num_epochs=1, output_numpy=True):
        np.testing.assert_array_equal(row["pts"], _points(int(row["label"]), largest))
        seen += 1
    assert seen == ROWS


def test_offsets_are_kept_in_four_bytes_below_four_gib_and_in_eight_from_it() -> None:
    small = np.cumsum(np.r_[0, np.full(100, 1000)]).astype(np.uint64)
    kept = kept_offsets(small)
    assert isinstance(kept, array) and kept.itemsize == 4
    assert list(kept) == small.tolist() and type(kept[-1]) is int
    large = small + np.uint64(0)
    large[-1] = (1 << 32) + 5  # a chunk of more than 4 GiB: its last offset does not fit
    kept = kept_offsets(large)
    assert isinstance(kept, array) and kept.itemsize == 8
    assert kept[-1] == (1 << 32) + 5


def test_shapes_are_kept_as_narrow_as_their_largest_dimension() -> None:
    for largest, itemsize in [(0, 1), (255, 1), (256, 2), (65_535, 2), (65_536, 4)]:
        shapes = np.array([[1, 3], [largest, 3]], dtype=np.uint64)
        kept = kept_shapes(shapes)
        assert kept.dtype.itemsize == itemsize and kept.tolist() == shapes.tolist()
    huge = np.array([[1 << 40, 1]], dtype=np.uint64)
    assert kept_shapes(huge).tolist() == [[1 << 40, 1]]
    view = np.frombuffer(np.arange(6, dtype=np.uint64).tobytes(), dtype=np.uint64).reshape(3, 2)
    assert kept_shapes(view).base is None  # a copy: a kept head holds no view of a map


def test_sweep_rows_weighs_the_heads_as_kept_not_as_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sweep_rows`` adds what rows read one by one lose to heads the cache cannot keep.
    With room for every head as kept (about a quarter of its stored bytes) but for half
    of them as stored, rows are read one by one, as where every head fits; with room for
    half of them as kept, a sweep. Weighed as stored, the 2M-row ``MapDataset`` read
    above would have been swept where its heads all fit."""
    path = tmp_path / "small"
    _write(path, largest=40)
    calls = sweeping(monkeypatch, budget=1 << 30)
    with DatasetReader.open(path) as reader:
        shard = reader.shards[0]
        col = shard.field_index("pts")
        field = shard.meta.schema.fields[col]
        pages = range(shard.meta.num_pages)
        stored = sum(head_length(field, int(shard.meta.page_rows[p])) for p in pages)
        kept = sum(kept_head_bytes(shard.parse_head(p, col)) for p in pages)
        assert kept < stored / 3
        # requests alone at 0.9 of what a pass must save: the heads decide
        iops = ROWS / (0.9 * dataset_reader._SWEEP_SPEEDUP)
        nbytes = column_bytes(reader, ["pts"])
        monkeypatch.setattr(
            dataset_reader, "probe_storage", lambda path: profile(iops, float(nbytes))
        )
        monkeypatch.setattr(dataset_reader, "head_cache_bytes", lambda: stored // 2)
        assert reader.sweep_rows(["pts"]) == 0
        monkeypatch.setattr(dataset_reader, "head_cache_bytes", lambda: kept // 2)
        assert reader.sweep_rows(["pts"]) == ROWS
    assert calls == []
