"""Resume positions belong to one run, not to the dataset definition (issue 25 §2).

``Dataset.set_state`` says where the *next* iterator over the dataset starts; an iterator
already made from the same dataset reads on as if nothing happened, and a run that never
reached the saved epoch leaves nothing behind for later runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from mrecord import Dataset, FileWriter, MindDataset, Shuffle, config, vision
from mrecord.errors import ArgumentError, PipelineError

BATCH = 2
ROWS = 40  # 20 batches an epoch: a prefetch of 2 cannot run ahead into the next epoch


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("isolation")
    with FileWriter(folder / "img.mrecord", shard_num=2) as writer:
        writer.add_schema({"id": {"type": "int64"}, "img": {"type": "uint8", "shape": [4, 4, 1]}})
        imgs = (np.arange(ROWS * 16).reshape(ROWS, 4, 4, 1) % 251).astype(np.uint8)
        writer.write_raw_data({"id": np.arange(ROWS), "img": imgs})
    return str(writer.files[0])


@pytest.fixture(autouse=True)
def _small_prefetch() -> Iterator[None]:
    old_prefetch, old_seed = config.get_prefetch_size(), config.get_seed()
    config.set_prefetch_size(2)
    config.set_seed(7)
    yield
    config.set_prefetch_size(old_prefetch)
    config.set_seed(old_seed)


def pipeline(files: str) -> Dataset:
    ds: Dataset = MindDataset(files, shuffle=Shuffle.GLOBAL, num_parallel_workers=1)
    ds = ds.map(vision.RandomVerticalFlip(0.5), input_columns=["img"])
    return ds.batch(BATCH)


def read(it: Any, epochs: int) -> list[tuple[Any, ...]]:
    """Every batch of ``epochs`` epochs, as plain values."""
    out = [(ids.tolist(), img.tobytes()) for _ in range(epochs) for ids, img in it]
    it.stop()
    return out


def test_set_state_moves_the_next_iterator_only(files: str) -> None:
    ds = pipeline(files)
    full = read(ds.create_tuple_iterator(num_epochs=2, output_numpy=True), 2)
    per_epoch = len(full) // 2
    other = ds.create_tuple_iterator(num_epochs=2, output_numpy=True)  # made before set_state
    ds.set_state(ds.get_state(1, 3))
    restored = ds.create_tuple_iterator(num_epochs=2, output_numpy=True)
    assert read(other, 2) == full  # unaffected
    assert read(restored, 2) == full[:per_epoch] + full[per_epoch + 3 :]


def test_a_run_that_stops_early_leaves_no_position_behind(files: str) -> None:
    ds = pipeline(files)
    full = read(ds.create_tuple_iterator(num_epochs=2, output_numpy=True), 2)
    per_epoch = len(full) // 2
    ds.set_state(ds.get_state(1, 3))
    # This run takes the position but never reaches epoch 1 ...
    assert read(ds.create_tuple_iterator(num_epochs=1, output_numpy=True), 1) == full[:per_epoch]
    # ... so the next one reads every row again.
    assert read(ds.create_tuple_iterator(num_epochs=2, output_numpy=True), 2) == full


def test_two_iterators_restored_from_different_states_each_keep_their_own(files: str) -> None:
    ds = pipeline(files)
    full = read(ds.create_tuple_iterator(num_epochs=2, output_numpy=True), 2)
    per_epoch = len(full) // 2
    first = ds.create_tuple_iterator(num_epochs=2, output_numpy=True)
    second = ds.create_tuple_iterator(num_epochs=2, output_numpy=True)
    first.load_state_dict({"version": 1, "epoch": 1, "rows": 3, "nodes": ds.get_state(1, 3)})
    second.load_state_dict({"version": 1, "epoch": 0, "rows": 5, "nodes": ds.get_state(0, 5)})
    assert read(first, 1) == full[per_epoch + 3 :]
    assert read(second, 2) == full[5:]
    assert read(ds.create_tuple_iterator(num_epochs=2, output_numpy=True), 2) == full


def test_a_state_of_another_shape_is_refused_by_set_state(files: str) -> None:
    ds = pipeline(files)
    other = ds.repeat(2)
    with pytest.raises(PipelineError, match="same pipeline"):
        ds.set_state(other.get_state(0, 3))
    # Nothing was left behind: the next iterator reads from the start.
    it = ds.create_tuple_iterator(num_epochs=1, output_numpy=True)
    assert len(read(it, 1)) == ROWS // BATCH


def test_an_iterator_that_is_refused_leaves_set_state_for_the_next(files: str) -> None:
    ds = pipeline(files)
    full = read(ds.create_tuple_iterator(num_epochs=1, output_numpy=True), 1)
    ds.set_state(ds.get_state(0, 4))
    with pytest.raises(ArgumentError, match="num_epochs"):
        ds.create_tuple_iterator(num_epochs=0)
    assert read(ds.create_tuple_iterator(num_epochs=1, output_numpy=True), 1) == full[4:]
