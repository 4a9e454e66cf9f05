"""Nodes declare how they change columns; offload plans from the declarations alone."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from mrecord import config
from mrecord.block import Block
from mrecord.errors import OffloadError
from mrecord.pipeline import Dataset, NumpySlicesDataset
from mrecord.pipeline.engine.context import ExecContext
from mrecord.pipeline.engine.effects import PASS_THROUGH, ColumnEffects


class AddOne:
    """An offloadable op."""

    offloadable = True

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x) + 1).astype(np.float32)

    def apply_batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        return (batch + 1).astype(np.float32)

    def __repr__(self) -> str:
        return "AddOne()"


class Tap(Dataset):
    """A new node type written outside mrecord: passes blocks through unchanged."""

    def __init__(self, child: Dataset, effects: ColumnEffects | None = None) -> None:
        super().__init__([child])
        self.effects = effects

    def _column_effects(self) -> ColumnEffects:
        return self.effects if self.effects is not None else super()._column_effects()

    def _column_names(self) -> list[str]:
        return self.children[0]._column_names()

    def _num_rows(self) -> int | None:
        return self.children[0]._num_rows()

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        yield from self.children[0]._execute(ctx, epoch)

    def _describe(self) -> str:
        return "Tap()"


def images(offload: bool | None) -> Dataset:
    data = {"image": np.arange(24, dtype=np.uint8).reshape(4, 2, 3), "label": np.arange(4)}
    source = NumpySlicesDataset(data, shuffle=False)
    return source.map(AddOne(), input_columns="image", offload=offload)


def test_the_default_is_reads_everything() -> None:
    effects = Tap(images(False))._column_effects()
    assert effects.reads is None and not effects.known


def test_an_undeclared_node_refuses_an_explicit_offload_naming_itself() -> None:
    with pytest.raises(OffloadError, match=r"Tap\(\)") as info:
        Tap(images(True)).plan()
    assert "_column_effects" in str(info.value)


def test_an_undeclared_node_keeps_auto_offload_out_and_says_why() -> None:
    config.set_auto_offload(True)
    try:
        plan = Tap(images(None)).plan()
    finally:
        config.reset()
    assert plan.offloaded == {}
    assert any("Tap()" in note for note in plan.notes)


def test_a_node_that_declares_pass_through_lets_offload_past_it() -> None:
    ds = Tap(images(True), PASS_THROUGH).batch(2)
    assert ds.plan().offloaded == {"image": ["AddOne()"]}
    first = next(iter(ds.create_tuple_iterator(num_epochs=1)))
    expected = np.arange(12, dtype=np.uint8).reshape(2, 2, 3) + 1
    assert np.array_equal(first[0], expected) and first[0].dtype == np.float32


def test_a_node_that_declares_it_reads_the_column_stops_offload() -> None:
    declared = ColumnEffects(reads=frozenset({"image"}), read_by="the checker of")
    with pytest.raises(OffloadError, match=r"read by the checker of Tap\(\)"):
        Tap(images(True), declared).plan()


def test_built_in_nodes_declare_their_effects() -> None:
    base = images(False)
    assert base._column_effects().offload_site
    assert base.batch(2)._column_effects().batch_level
    assert base.rename(["image"], ["pixels"])._column_effects().renames == (("image", "pixels"),)
    assert base.project(["image"])._column_effects().drops
    assert base.zip(images(False).rename(["image", "label"], ["a", "b"]))._column_effects().joins
    for passing in (base.repeat(2), base.shuffle(4), base.skip(1), base.take(1)):
        assert passing._column_effects() == PASS_THROUGH
    reads = base.filter(lambda x: True, input_columns=["label"])._column_effects().reads
    assert reads == frozenset({"label"})
