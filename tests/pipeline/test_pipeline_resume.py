"""Mid-epoch resume of mrecord's own pipeline: iterator state_dict / load_state_dict.

MindDataset -> map (random op) -> batch -> repeat chains resume exactly: the rows
after the checkpoint, random values included, are those of the uninterrupted run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord import Dataset, FileWriter, MindDataset, Shuffle, vision
from mrecord.errors import PipelineError


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("resume")
    with FileWriter(folder / "img.mrecord", shard_num=2) as writer:
        writer.add_schema({"id": {"type": "int64"}, "img": {"type": "uint8", "shape": [4, 4, 1]}})
        ids = np.arange(23)
        imgs = (np.arange(23 * 16).reshape(23, 4, 4, 1) % 251).astype(np.uint8)
        writer.write_raw_data({"id": ids, "img": imgs})
    return str(writer.files[0])


def pipeline(files: str, batch: int | None, repeat: int | None) -> Any:
    ds: Dataset = MindDataset(files, shuffle=Shuffle.GLOBAL, num_parallel_workers=1)
    ds = ds.map(vision.RandomVerticalFlip(0.5), input_columns=["img"])
    if batch:
        ds = ds.batch(batch)
    if repeat:
        ds = ds.repeat(repeat)
    return ds


def rows(it: Any, limit: int | None = None) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if limit == 0:
        return out
    for row in it:
        out.append((row["id"].tolist(), row["img"].tobytes()))
        if limit is not None and len(out) == limit:
            break
    return out


Make = Callable[[], Any]


@given(
    shape=st.sampled_from([(None, None), (4, None), (None, 2), (5, 3)]),
    k=st.integers(0, 60),
    epochs=st.sampled_from([1, 2]),
)
def test_iterator_resumes_exactly(files: str, shape: Any, k: int, epochs: int) -> None:
    batch, repeat = shape
    full_it = pipeline(files, batch, repeat).create_dict_iterator(num_epochs=epochs)
    full = [rows(full_it) for _ in range(epochs)]
    flat = [r for epoch in full for r in epoch]
    k = min(k, len(flat) - 1)
    it = pipeline(files, batch, repeat).create_dict_iterator(num_epochs=epochs)
    head: list[Any] = []
    for _ in range(epochs):
        head += rows(it, k - len(head))
        if len(head) == k:
            break
    state = json.loads(json.dumps(it.state_dict()))
    it.stop()
    resumed = pipeline(files, batch, repeat).create_dict_iterator(num_epochs=epochs)
    resumed.load_state_dict(state)
    rest: list[Any] = []
    for _ in range(epochs - state["epoch"]):
        rest += rows(resumed)
    assert head + rest == flat
    with pytest.raises(PipelineError, match="num_epochs"):  # no epoch past num_epochs
        next(resumed)


def test_unresumable_nodes_say_so(files: str) -> None:
    ds = MindDataset(files, shuffle=Shuffle.GLOBAL).shuffle(4)
    it = ds.create_dict_iterator(num_epochs=1)
    next(it)
    with pytest.raises(PipelineError, match="cannot resume mid-epoch"):
        it.state_dict()
    it.stop()


def test_a_state_from_another_pipeline_is_refused(files: str) -> None:
    it = pipeline(files, 4, None).create_dict_iterator(num_epochs=1)
    next(it)
    state = it.state_dict()
    it.stop()
    other = pipeline(files, None, 2).create_dict_iterator(num_epochs=1)
    with pytest.raises(PipelineError, match="same pipeline"):
        other.load_state_dict(state)
    other.stop()


@pytest.mark.parametrize(("sink", "sink_size"), [(False, -1), (True, -1), (True, 4)])
def test_model_train_resumes_at_initial_epoch_and_step(
    files: str, sink: bool, sink_size: int
) -> None:
    from mrecord import Model

    def run(**kw: Any) -> list[Any]:
        seen: list[Any] = []

        def step(ids: np.ndarray, img: np.ndarray) -> float:
            seen.append((ids.tolist(), img.tobytes()))
            return 0.0

        Model(step).train(
            3, pipeline(files, 5, None), dataset_sink_mode=sink, sink_size=sink_size, **kw
        )
        return seen

    full = run()
    per_epoch = len(full) // 3
    assert run(initial_epoch=1, initial_step=2) == full[per_epoch + 2 :]
    assert run(initial_epoch=2) == full[2 * per_epoch :]


def test_initial_step_needs_a_resumable_dataset() -> None:
    from mrecord import Model
    from mrecord.errors import ArgumentError

    batches = [(np.zeros(2),)] * 4
    with pytest.raises(ArgumentError, match="cannot start at batch"):
        Model(lambda x: 0.0).train(2, batches, initial_step=1)


@given(steps=st.lists(st.tuples(st.booleans(), st.integers(0, 9)), max_size=8))
def test_next_and_for_loops_share_one_stream_of_rows_and_one_count(
    files: str, steps: list[tuple[bool, int]]
) -> None:
    """``next()`` calls and ``for`` loops broken off anywhere (across blocks) take from the
    same rows: together they give the epoch's rows in order, none twice, and
    ``state_dict()["rows"]`` is always how many were taken this epoch."""
    ds = MindDataset(files, shuffle=Shuffle.GLOBAL, num_parallel_workers=1)
    whole = [int(row[0]) for row in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)]
    with ds.create_tuple_iterator(num_epochs=2, output_numpy=True) as it:
        got: list[int] = []
        ended = False
        for use_next, count in steps:
            for _ in range(count):
                row = next(it, None) if use_next else next(iter(it), None)  # iter: a loop's
                if row is None:
                    ended = True
                    break
                got.append(int(row[0]))
            state = it.state_dict()
            # the count is this epoch's: the next one's (0) once the epoch has ended
            assert (state["epoch"], state["rows"]) == ((1, 0) if ended else (0, len(got)))
            if ended:
                break
        if not ended:
            got.extend(int(row[0]) for row in it)
    assert got == whole and sorted(whole) == list(range(23))
