"""Map chunking across source blocks, and the offload step's own thread pool.

Chunking and parallel offload are speed choices: they must never change which rows come
out, in which order, with which seeds, and they must shut down like every other pool.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord import config, vision
from mrecord.block import Block
from mrecord.errors import OperationError
from mrecord.pipeline import Dataset, GeneratorDataset, NumpySlicesDataset
from mrecord.pipeline.engine.chunks import CHUNK_ROWS, rechunk


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    config.reset()


def _blocks(sizes: list[int]) -> list[Block]:
    out, start = [], 0
    for size in sizes:
        ids = np.arange(start, start + size, dtype=np.int64)
        out.append(Block({"a": ids * 3, "s": [f"r{i}" for i in ids]}, ids))
        start += size
    return out


@given(sizes=st.lists(st.integers(0, 150), max_size=8), rows=st.integers(1, 70))
def test_rechunk_gives_exact_chunks_of_the_same_rows(sizes: list[int], rows: int) -> None:
    chunks = list(rechunk(iter(_blocks(sizes)), rows))
    total = sum(sizes)
    assert [len(c) for c in chunks] == [rows] * (total // rows) + (
        [total % rows] if total % rows else []
    )
    ids = np.concatenate([c.row_ids for c in chunks]) if chunks else np.zeros(0, np.int64)
    np.testing.assert_array_equal(ids, np.arange(total))
    for chunk in chunks:
        np.testing.assert_array_equal(chunk.columns["a"], chunk.row_ids * 3)
        assert chunk.columns["s"] == [f"r{i}" for i in chunk.row_ids]


def test_map_output_does_not_depend_on_how_the_source_cuts_its_blocks() -> None:
    """Random crops and flips per row: the same rows give the same output whatever the
    source block sizes (chunks follow row positions, not blocks)."""
    config.set_seed(11)
    images = np.random.default_rng(0).integers(0, 256, (200, 6, 6, 3), dtype=np.uint8)
    ops = [vision.RandomCrop(4, padding=1), vision.RandomHorizontalFlip(), vision.HWC2CHW()]

    def run(ds: Any) -> np.ndarray:
        ds = ds.map(ops, input_columns="image", num_parallel_workers=3)
        return np.stack([row["image"] for row in ds.create_dict_iterator(num_epochs=1)])

    whole = run(NumpySlicesDataset({"image": images}, shuffle=False))
    rows = GeneratorDataset(lambda: ((img,) for img in images), ["image"])
    np.testing.assert_array_equal(run(rows), whole)


def test_batch_of_chunk_size_keeps_the_map_output_without_copying_it() -> None:
    """With chunks of CHUNK_ROWS rows a batch of that size is one chunk: still right."""
    images = np.random.default_rng(1).integers(0, 256, (3 * CHUNK_ROWS + 5, 5, 5, 3), np.uint8)
    ds: Dataset = NumpySlicesDataset({"image": images}, shuffle=False)
    ds = ds.map([vision.Rescale(1.0, 0.0), vision.HWC2CHW()], input_columns="image")
    batches = [b["image"] for b in ds.batch(CHUNK_ROWS).create_dict_iterator(num_epochs=1)]
    assert [len(b) for b in batches] == [CHUNK_ROWS] * 3 + [5]
    np.testing.assert_array_equal(
        np.concatenate(batches), images.astype(np.float32).transpose(0, 3, 1, 2)
    )


# ---- the offload pool -----------------------------------------------------------------------


def _cifar_like(n: int, offload: bool, workers: int) -> list[np.ndarray]:
    images = np.random.default_rng(2).integers(0, 256, (n, 8, 8, 3), dtype=np.uint8)
    ds: Dataset = NumpySlicesDataset({"image": images, "label": np.arange(n)}, shuffle=False)
    ops = [
        vision.RandomCrop(8, padding=2),
        vision.RandomHorizontalFlip(),
        vision.Rescale(1 / 255, 0),
        vision.Normalize([0.5, 0.5, 0.5], [0.2, 0.2, 0.2]),
        vision.HWC2CHW(),
    ]
    ds = ds.map(ops, input_columns="image", num_parallel_workers=workers, offload=offload)
    ds = ds.batch(16, drop_remainder=True)
    return [
        np.concatenate([b["image"].reshape(16, -1), b["label"].reshape(16, 1)], axis=1)
        for b in ds.create_dict_iterator(num_epochs=1)
    ]


def test_parallel_offload_keeps_batch_order_and_values() -> None:
    config.set_seed(3)
    offloaded = _cifar_like(600, offload=True, workers=4)
    in_map = _cifar_like(600, offload=False, workers=1)
    assert len(offloaded) == len(in_map) == 37
    for got, want in zip(offloaded, in_map, strict=True):
        np.testing.assert_array_equal(got, want)
    labels = np.concatenate([b[:, -1] for b in offloaded])
    np.testing.assert_array_equal(labels, np.arange(592))


def test_offload_pool_threads_end_with_the_iterator() -> None:
    images = np.zeros((4000, 4, 4, 3), np.uint8)
    ds: Dataset = NumpySlicesDataset({"image": images}, shuffle=False)
    ds = ds.map([vision.RandomHorizontalFlip(), vision.HWC2CHW()], input_columns="image",
                num_parallel_workers=2, offload=True).batch(8)  # fmt: skip
    it = ds.create_dict_iterator(num_epochs=1)
    next(it)
    assert any(t.name.startswith("mrecord-offload") for t in threading.enumerate())
    it.stop()
    assert not any(t.name.startswith("mrecord-offload") for t in threading.enumerate())


def test_error_in_an_offloaded_op_reaches_the_consumer() -> None:
    images = np.zeros((64, 4, 4, 4), np.uint8)  # 4 channels, Normalize has 3 values
    ds: Dataset = NumpySlicesDataset({"image": images}, shuffle=False)
    ds = ds.map(
        [vision.RandomHorizontalFlip(), vision.Normalize([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])],
        input_columns="image",
        offload=True,
    ).batch(8)
    with pytest.raises((OperationError, ValueError), match="channels"):
        for _ in ds.create_dict_iterator(num_epochs=1):
            pass
    assert not any(t.name.startswith("mrecord-offload") for t in threading.enumerate())
