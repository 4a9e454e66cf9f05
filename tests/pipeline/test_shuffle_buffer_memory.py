"""``shuffle(buffer_size)`` whose buffer cannot fit in memory is refused at its first rows,
saying how many rows would fit, instead of filling memory until the process is killed
(``shuffle(buffer_size=10000)``, as MindSpore's tutorials write it, over 100 KB images in
a 300 MB memory group was OOM-killed). Nodes that keep a few rows of many reads (a shuffle
buffer, a sparse filter) keep those rows' bytes, not the reader's whole read buffers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import mrecord
from mrecord.errors import ArgumentError
from mrecord.pipeline.engine import context

_ROW = 100_000


def _images(rows: int) -> Any:
    blob = bytes(_ROW)
    return mrecord.GeneratorDataset(
        lambda: ((blob, np.int32(i)) for i in range(rows)), ["image", "label"], shuffle=False
    )


def _labels(ds: Any) -> list[int]:
    return [int(r["label"]) for r in ds.create_dict_iterator(num_epochs=1, output_numpy=True)]


def test_a_buffer_larger_than_memory_is_refused_with_the_size_that_fits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(context, "memory_budget", lambda: 100 << 20)  # 100 MiB
    ds = _images(3_000).shuffle(buffer_size=2_000)  # a 200 MB buffer
    with pytest.raises(ArgumentError, match=r"shuffle\(buffer_size=2000\)") as info:
        _labels(ds)
    text = str(info.value)
    assert "at most 524 rows" in text  # half of 100 MiB over 100,008 bytes a row
    assert "MindDataset(shuffle=True)" in text


def test_a_buffer_that_fits_or_a_dataset_smaller_than_it_shuffles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(context, "memory_budget", lambda: 100 << 20)
    assert sorted(_labels(_images(3_000).shuffle(buffer_size=500))) == list(range(3_000))
    # a buffer larger than the dataset holds the dataset: 400 rows, 40 MB
    assert sorted(_labels(_images(400).shuffle(buffer_size=100_000))) == list(range(400))


def _root_bytes(value: np.ndarray) -> int:
    """The size of the buffer ``value`` views at the bottom of its base chain (its own
    bytes when it owns them; 0 for a view of a file's memory map)."""
    import mmap

    root: Any = value
    while isinstance(root, np.ndarray) and root.base is not None:
        root = root.base
    if isinstance(root, mmap.mmap):
        return 0
    return memoryview(root).nbytes


@pytest.mark.parametrize("budget", [32 << 20, 64 << 30])
def test_buffered_rows_hold_their_own_bytes_not_the_readers_buffers(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    """``MindDataset`` hands out 100 KB values as views of its 8 MiB read buffers. A
    shuffle buffer keeps rows of many reads: each kept view kept its whole buffer, and
    ``shuffle(buffer_size=700)`` over the bench's images (a 67 MB buffer) was OOM-killed in
    a 300 MB memory group. Values that view a buffer more than twice their size are
    copied as they enter the buffer where the buffers it would keep could pass its share
    of the memory budget (a 32 MiB budget here); with memory to spare they stay views
    (copies made a warm shuffle of images 1.35x slower)."""
    path = tmp_path / "images.mrecord"
    with mrecord.FileWriter(path) as writer:
        writer.add_schema({"image": {"type": "bytes"}, "label": {"type": "int32"}})
        writer.write_raw_data([{"image": bytes([i % 251]) * _ROW, "label": i} for i in range(300)])
    monkeypatch.setattr(context, "memory_budget", lambda: budget)
    source = mrecord.MindDataset(str(path), shuffle=False)
    first = next(source.create_dict_iterator(num_epochs=1, output_numpy=True))["image"]
    assert _root_bytes(first) > 2 * first.nbytes  # the reader's values view its buffers
    labels, roots = [], []
    for row in source.shuffle(buffer_size=100).create_dict_iterator(
        num_epochs=1, output_numpy=True
    ):
        labels.append(int(row["label"]))
        assert bytes(row["image"][:1]) == bytes([int(row["label"]) % 251])
        roots.append(_root_bytes(row["image"]))
    assert sorted(labels) == list(range(300))
    if budget < 1 << 30:
        assert max(roots) <= 2 * _ROW, max(roots)
    else:
        assert min(roots) > 2 * _ROW


def test_rows_a_sparse_filter_keeps_hold_their_own_bytes(tmp_path: Any) -> None:
    """``filter`` keeping one row in a hundred over the bench's images, then ``batch(32)``:
    each batch's rows viewed 32 different 8 MiB read buffers, and the run was OOM-killed
    in a 300 MB memory group. Kept rows that are under half of what was read are copies."""
    path = _images_dataset(tmp_path)
    source = mrecord.MindDataset(str(path), shuffle=False)
    kept = source.filter(lambda label: label % 50 == 0, input_columns=["label"])
    rows = list(kept.create_dict_iterator(num_epochs=1, output_numpy=True))
    assert [int(r["label"]) for r in rows] == list(range(0, 300, 50))
    assert all(bytes(r["image"][:1]) == bytes([int(r["label"]) % 251]) for r in rows)
    assert max(_root_bytes(r["image"]) for r in rows) <= 2 * _ROW
    every = mrecord.MindDataset(str(path), shuffle=False).filter(
        lambda label: True, input_columns=["label"]
    )  # every row kept: views, as read
    first = next(every.create_dict_iterator(num_epochs=1, output_numpy=True))["image"]
    assert _root_bytes(first) > 2 * _ROW


def _images_dataset(tmp_path: Any) -> Any:
    path = tmp_path / "images.mrecord"
    with mrecord.FileWriter(path) as writer:
        writer.add_schema({"image": {"type": "bytes"}, "label": {"type": "int32"}})
        writer.write_raw_data([{"image": bytes([i % 251]) * _ROW, "label": i} for i in range(300)])
    return path
