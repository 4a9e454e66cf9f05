"""Offload: which ops move, the constraints, and offloaded == per-row output."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from mrecord import config
from mrecord.errors import OffloadError
from mrecord.pipeline import Dataset, NumpySlicesDataset


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    config.reset()


class FakeFlip:
    """Random, offloadable: reverses the last axis when the row's seed is odd."""

    is_random = True
    offloadable = True

    def __call__(self, x: np.ndarray, *, seed: int) -> np.ndarray:
        out: np.ndarray = x[..., ::-1].copy() if seed % 2 else x.copy()
        return out

    def apply_batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        odd = (seeds % 2 == 1).reshape((-1,) + (1,) * (batch.ndim - 1))
        return np.where(odd, batch[..., ::-1], batch)

    def __repr__(self) -> str:
        return "FakeFlip()"


class AddOne:
    """Offloadable, not random, float32 output."""

    offloadable = True

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x) + 1).astype(np.float32)

    def apply_batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        assert len(seeds) == len(batch)
        return (batch + 1).astype(np.float32)

    def __repr__(self) -> str:
        return "AddOne()"


class Double(AddOne):
    def __call__(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x) * 2).astype(np.float32)

    def apply_batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        return (batch * 2).astype(np.float32)

    def __repr__(self) -> str:
        return "Double()"


def plain(x: np.ndarray) -> np.ndarray:
    return np.asarray(x) + 10


def images(n: int = 40) -> NumpySlicesDataset:
    data = np.arange(n * 2 * 3, dtype=np.int64).reshape(n, 2, 3)
    return NumpySlicesDataset({"image": data, "label": np.arange(n)}, shuffle=False)


def rows(ds: Dataset, epochs: int = 1) -> list[list[Any]]:
    it = ds.create_tuple_iterator(num_epochs=epochs)
    return [[v.tolist() for v in r] for _ in range(epochs) for r in it]


def build(offload: bool | None, workers: int = 2) -> Dataset:
    ds = images().map(plain, input_columns="image", num_parallel_workers=workers)
    ds = ds.map([FakeFlip(), AddOne()], input_columns="image", offload=offload)
    ds = ds.map(lambda y: y * 3, input_columns="label")  # a later map on another column is fine
    return ds.shuffle(8).batch(6).repeat(2)


def test_offloaded_output_equals_per_row_output() -> None:
    config.set_seed(11)
    want = rows(build(False), epochs=2)
    assert rows(build(True), epochs=2) == want
    assert rows(build(True, workers=4), epochs=2) == want
    flips = set()
    for image_batch, label_batch in want:
        for image, label in zip(image_batch, label_batch, strict=True):
            original = (np.arange(6).reshape(2, 3) + 6 * (label // 3) + 11).tolist()
            flips.add(image == [r[::-1] for r in original])
            assert image in (original, [r[::-1] for r in original])
    assert flips == {True, False}  # some rows flipped, some not


def test_plan_shows_the_offloaded_ops() -> None:
    ds = build(True)
    text = str(ds.plan())
    assert "[offloaded: FakeFlip(), AddOne()]" in text
    assert "image: FakeFlip(), AddOne()" in text
    assert ds.plan().offloaded == {"image": ["FakeFlip()", "AddOne()"]}
    assert build(False).plan().offloaded == {}
    assert ds.get_col_names() == ["image", "label"]  # hidden seed columns never show


def test_output_types_reflect_offloaded_cast() -> None:
    ds = images().map(AddOne(), input_columns="image", offload=True).batch(4)
    assert ds.output_types()[0] == np.dtype(np.float32)
    assert ds.output_shapes()[0] == [4, 2, 3]


def test_auto_offload_and_per_map_argument_wins() -> None:
    config.set_auto_offload(True)
    assert build(None).plan().offloaded == {"image": ["FakeFlip()", "AddOne()"]}
    assert build(False).plan().offloaded == {}
    config.set_auto_offload(False)
    assert build(None).plan().offloaded == {}


def test_only_the_tail_offloadable_ops_move() -> None:
    ds = images().map([FakeFlip(), plain, AddOne()], input_columns="image", offload=True)
    plan = ds.plan()
    assert plan.offloaded == {"image": ["AddOne()"]}
    assert any("partly offloaded" in note for note in plan.notes)
    config.set_seed(3)
    off = rows(ds.batch(5))
    config.set_seed(3)
    on = rows(images().map([FakeFlip(), plain, AddOne()], input_columns="image").batch(5))
    assert off == on


def test_consecutive_maps_of_a_column_offload_in_order() -> None:
    ds: Dataset = images().map(AddOne(), input_columns="image", offload=True)
    ds = ds.map(Double(), input_columns="image", offload=True).rename("image", "img").batch(4)
    assert ds.plan().offloaded == {"img": ["AddOne()", "Double()"]}
    first = rows(ds)[0][0]
    assert first[0][0] == [2.0, 4.0, 6.0]  # (x + 1) * 2, not x * 2 + 1


def test_offload_without_batch_works_per_block() -> None:
    config.set_seed(9)
    on = rows(images().map(FakeFlip(), input_columns="image", offload=True))
    config.set_seed(9)
    off = rows(images().map(FakeFlip(), input_columns="image"))
    assert on == off


def test_ops_after_batch_offload_per_batch() -> None:
    config.set_seed(4)
    ds = images().batch(4).map(FakeFlip(), input_columns="image", offload=True)
    config.set_seed(4)
    plain_ds = images().batch(4).map(FakeFlip(), input_columns="image")
    assert ds.plan().offloaded == {"image": ["FakeFlip()"]}
    assert rows(ds) == rows(plain_ds)


@pytest.mark.parametrize("join", ["concat", "zip"])
def test_offload_refuses_concat_and_zip(join: str) -> None:
    left = images().map(AddOne(), input_columns="image", offload=True)
    right = images(4) if join == "concat" else images(4).rename(["image", "label"], ["a", "b"])
    ds = left + right if join == "concat" else left.zip(right)
    with pytest.raises(OffloadError, match="concat or zip"):
        ds.plan()


def test_auto_offload_with_concat_falls_back_and_says_so() -> None:
    config.set_auto_offload(True)
    add = AddOne()
    ds = images(3).map(add, input_columns="image") + images(2).map(add, input_columns="image")
    plan = ds.plan()
    assert plan.offloaded == {} and any("concat or zip" in n for n in plan.notes)
    assert len(rows(ds)) == 5


def test_offload_refuses_a_map_that_is_not_last_for_its_column() -> None:
    ds = images().map(AddOne(), input_columns="image", offload=True)
    ds = ds.map(plain, input_columns="image")
    with pytest.raises(OffloadError, match="last map operations"):
        ds.plan()
    config.set_auto_offload(True)
    auto = images().map(AddOne(), input_columns="image").map(plain, input_columns="image")
    assert auto.plan().offloaded == {}


def test_offload_refuses_user_output_columns() -> None:
    ds = images().map(AddOne(), input_columns="image", output_columns="image2", offload=True)
    with pytest.raises(OffloadError, match="output_columns"):
        ds.plan()


def test_filter_reading_the_column_blocks_offload() -> None:
    ds: Dataset = images().map(AddOne(), input_columns="image", offload=True)
    ds = ds.filter(lambda img: img.sum() > 0, input_columns=["image"])
    with pytest.raises(OffloadError, match="predicate"):
        ds.plan()


def test_map_without_offloadable_tail_keeps_its_ops() -> None:
    ds = images().map(plain, input_columns="image", offload=True)
    plan = ds.plan()
    assert plan.offloaded == {}
    assert any("not offloadable" in n for n in plan.notes)
    assert rows(ds)[0][0] == [[10, 11, 12], [13, 14, 15]]
