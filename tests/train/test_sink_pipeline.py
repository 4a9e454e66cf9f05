"""The sink over mrecord's own pipeline (NumpySlicesDataset / GeneratorDataset + batch)."""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from mrecord.errors import OperationError
from mrecord.train import LossMonitor, Model

pipeline = pytest.importorskip("mrecord.pipeline")


@pytest.fixture(autouse=True)
def _no_threads_left() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 10
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.01)  # pipeline threads end asynchronously after stop()
    assert set(threading.enumerate()) - before == set()


def batched(n: int = 10, batch: int = 3) -> object:
    ds = pipeline.NumpySlicesDataset({"x": np.arange(n)}, shuffle=False)
    return ds.batch(batch, drop_remainder=True)


@pytest.mark.parametrize("sink", [True, False])
def test_epochs_over_a_real_pipeline(sink: bool) -> None:
    seen: list[list[int]] = []

    def step(x: np.ndarray) -> float:
        seen.append(x.tolist())
        return 0.0

    Model(step).train(2, batched(), dataset_sink_mode=sink)
    assert seen == [[0, 1, 2], [3, 4, 5], [6, 7, 8]] * 2


def test_sink_size_continues_across_epochs_of_a_real_pipeline() -> None:
    seen: list[list[int]] = []

    def step(x: np.ndarray) -> float:
        seen.append(x.tolist())
        return float(x.sum())

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        Model(step).train(
            4, batched(), callbacks=[LossMonitor()], dataset_sink_mode=True, sink_size=2
        )
    batches = [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert seen == [batches[k % 3] for k in range(8)]
    assert out.getvalue().splitlines() == [
        "epoch: 1 step: 2, loss is 12.0",
        "epoch: 2 step: 2, loss is 3.0",
        "epoch: 3 step: 2, loss is 21.0",
        "epoch: 4 step: 2, loss is 12.0",
    ]


def test_map_error_reaches_the_training_loop() -> None:
    def fragile(x: np.ndarray) -> np.ndarray:
        if int(x) == 7:
            raise ValueError("cannot process 7")
        return x

    ds = pipeline.NumpySlicesDataset({"x": np.arange(10)}, shuffle=False)
    ds = ds.map(fragile, input_columns="x").batch(2)
    seen: list[list[int]] = []

    def step(x: np.ndarray) -> float:
        seen.append(x.tolist())
        return 0.0

    with pytest.raises(OperationError) as info:
        Model(step).train(1, ds, dataset_sink_mode=True)
    assert "cannot process 7" in repr(info.value) + repr(info.value.__cause__)
    assert len(seen) <= 3  # at most the batches before row 7 (the pipeline may fail earlier)
