"""Model.train: sink_size arithmetic, series vs pipeline, callbacks, errors, data_sink."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.errors import ArgumentError
from mrecord.train import (
    Callback,
    LambdaCallback,
    LossMonitor,
    Model,
    RunContext,
    TimeMonitor,
    data_sink,
)
from mrecord.train.testing import FakeDataset

CASES = json.loads((Path(__file__).parents[1] / "cases" / "sink_cases.json").read_text())


def sink_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("mrecord-sink-")]


@pytest.fixture(autouse=True)
def _no_threads_left() -> Iterator[None]:
    yield
    for t in sink_threads():
        t.join(10)
    assert sink_threads() == []


class Recorder(Callback):
    """Records every hook call as (hook, cur_epoch_num, cur_step_num)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def _rec(self, name: str, ctx: RunContext) -> None:
        p = ctx.original_args()
        self.calls.append((name, p.cur_epoch_num, p.cur_step_num))

    def on_train_begin(self, run_context: RunContext) -> None:
        self._rec("begin", run_context)

    def on_train_epoch_begin(self, run_context: RunContext) -> None:
        self._rec("epoch_begin", run_context)

    def on_train_step_begin(self, run_context: RunContext) -> None:
        self._rec("step_begin", run_context)

    def on_train_step_end(self, run_context: RunContext) -> None:
        self._rec("step_end", run_context)

    def on_train_epoch_end(self, run_context: RunContext) -> None:
        self._rec("epoch_end", run_context)

    def on_train_end(self, run_context: RunContext) -> None:
        self._rec("end", run_context)

    def names(self, name: str) -> list[tuple[int, int]]:
        return [(e, s) for n, e, s in self.calls if n == name]


class Seen:
    """A step function that records the (pass, index) of each batch it gets."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def __call__(self, epoch: np.ndarray, index: np.ndarray) -> float:
        self.seen.append((int(epoch[0]), int(index[0])))
        return 0.5


# -- the doc's numbers -----------------------------------------------------------------


def test_lenet_doc_example_sink_size_1000() -> None:
    case = CASES["lenet_sink"]
    losses: list[np.float32] = [np.float32(line.rsplit(" ", 1)[1]) for line in case["loss_lines"]]
    seen: list[tuple[int, int]] = []

    def step(epoch: np.ndarray, index: np.ndarray) -> np.float32:
        k = len(seen)
        seen.append((int(epoch[0]), int(index[0])))
        return losses[k // int(case["sink_size"])]  # the doc's loss on each sink's last step

    ds = FakeDataset(case["dataset_size"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        summary = Model(step).train(
            case["epoch"],
            ds,
            callbacks=[LossMonitor()],
            dataset_sink_mode=True,
            sink_size=case["sink_size"],
        )
    assert out.getvalue().splitlines() == case["loss_lines"]  # ten prints, as in the doc
    assert len(seen) == case["total_steps"] == summary.steps
    n = case["dataset_size"]
    assert seen == [(k // n, k % n) for k in range(case["total_steps"])]  # endless traversal
    assert summary.epochs == case["epoch"]
    assert summary.sink


def test_sink_size_minus_one_trains_whole_dataset_each_epoch() -> None:
    step, rec = Seen(), Recorder()
    Model(step).train(3, FakeDataset(4), callbacks=rec, dataset_sink_mode=True)
    assert step.seen == [(e, i) for e in range(3) for i in range(4)]
    assert rec.names("step_end") == [(1, 4), (2, 8), (3, 12)]  # once per sink


def test_series_mode_ignores_sink_size_and_calls_back_every_step() -> None:
    step, rec = Seen(), Recorder()
    Model(step).train(2, FakeDataset(3), callbacks=[rec], dataset_sink_mode=False, sink_size=2)
    assert step.seen == [(e, i) for e in range(2) for i in range(3)]
    assert rec.names("step_end") == [(1, 1), (1, 2), (1, 3), (2, 4), (2, 5), (2, 6)]
    assert rec.names("epoch_end") == [(1, 3), (2, 6)]
    assert rec.calls[0][0] == "begin" and rec.calls[-1][0] == "end"


@given(
    size=st.integers(1, 7),
    sink_size=st.one_of(st.just(-1), st.integers(1, 10)),
    epochs=st.integers(1, 4),
    continuous=st.booleans(),
)
def test_sink_steps_and_continuation(
    size: int, sink_size: int, epochs: int, continuous: bool
) -> None:
    step, rec = Seen(), Recorder()
    ds = FakeDataset(size, continuous=continuous)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        summary = Model(step).train(
            epochs, ds, callbacks=[rec, LossMonitor()], dataset_sink_mode=True, sink_size=sink_size
        )
    per_epoch = sink_size if sink_size > 0 else size
    total = epochs * per_epoch
    assert summary.steps == total
    assert step.seen == [(k // size, k % size) for k in range(total)]
    assert ds.requested_epochs == [math.ceil(total / size)]
    assert rec.names("step_end") == [(e, e * per_epoch) for e in range(1, epochs + 1)]
    assert len(out.getvalue().splitlines()) == epochs  # one loss print per epoch


def test_initial_epoch_resumes_numbering() -> None:
    step, rec = Seen(), Recorder()
    Model(step).train(
        5, FakeDataset(4), callbacks=rec, dataset_sink_mode=True, sink_size=2, initial_epoch=3
    )
    assert len(step.seen) == 2 * 2
    assert rec.names("step_end") == [(4, 8), (5, 10)]


# -- series vs pipeline, by event order -------------------------------------------------


def run_with_events(sink: bool, size: int = 6) -> tuple[list[tuple[str, int]], list[bool]]:
    """Record producer and step events; each step (but the last) waits, bounded, for the
    production of the next batch to start, and records whether it did."""
    lock = threading.Lock()
    events: list[tuple[str, int]] = []
    started = [threading.Event() for _ in range(size)]
    overlapped: list[bool] = []

    def log(name: str, i: int) -> None:
        with lock:
            events.append((name, i))

    def before(epoch: int, i: int) -> None:
        log("produce_start", i)
        started[i].set()

    def after(epoch: int, i: int) -> None:
        log("produce_end", i)

    def step(epoch: np.ndarray, index: np.ndarray) -> float:
        i = int(index[0])
        log("step_start", i)
        if i + 1 < size:
            # In series nothing can start batch i + 1 while this step runs: don't wait long.
            overlapped.append(started[i + 1].wait(10 if sink else 0.01))
        log("step_end", i)
        return 0.0

    ds = FakeDataset(size, before_batch=before, after_batch=after)
    Model(step, queue_capacity=2).train(1, ds, dataset_sink_mode=sink)
    return events, overlapped


def test_series_mode_alternates_data_and_step() -> None:
    events, overlapped = run_with_events(sink=False)
    expected = [
        (name, i)
        for i in range(6)
        for name in ("produce_start", "produce_end", "step_start", "step_end")
    ]
    assert events == expected
    assert overlapped == [False] * 5


def test_sink_mode_produces_the_next_batch_while_the_step_runs() -> None:
    events, overlapped = run_with_events(sink=True)
    assert overlapped == [True] * 5  # batch i + 1 started during step i, every time
    for i in range(5):
        assert events.index(("produce_start", i + 1)) < events.index(("step_end", i))
    # and batches still reach the step in order, each after it was produced
    steps = [i for name, i in events if name == "step_start"]
    assert steps == list(range(6))
    for i in range(6):
        assert events.index(("produce_end", i)) < events.index(("step_start", i))


# -- callbacks ----------------------------------------------------------------------------


def test_request_stop_in_sink_mode_ends_after_the_sink() -> None:
    stopper = LambdaCallback(
        on_train_epoch_end=lambda ctx: (
            ctx.request_stop() if ctx.original_args().cur_epoch_num == 2 else None
        )
    )
    step, rec = Seen(), Recorder()
    summary = Model(step).train(
        10, FakeDataset(100), callbacks=[rec, stopper], dataset_sink_mode=True, sink_size=3
    )
    assert len(step.seen) == 6 == summary.steps
    assert rec.names("end") == [(2, 6)]


def test_request_stop_in_series_mode_ends_after_the_step() -> None:
    stopper = LambdaCallback(
        on_train_step_end=lambda ctx: (
            ctx.request_stop() if ctx.original_args().cur_step_num == 3 else None
        )
    )
    step, rec = Seen(), Recorder()
    Model(step).train(5, FakeDataset(10), callbacks=[rec, stopper])
    assert len(step.seen) == 3
    assert rec.names("epoch_end") == [(1, 3)]
    assert rec.names("end") == [(1, 3)]


def test_legacy_hook_names_are_called() -> None:
    class Legacy(Callback):
        def __init__(self) -> None:
            self.steps = 0

        def step_end(self, run_context: RunContext) -> None:
            self.steps += 1

    cb = Legacy()
    Model(Seen()).train(1, FakeDataset(3), callbacks=cb)
    assert cb.steps == 3


def test_loss_monitor_per_print_times_and_tuple_outputs(capsys: pytest.CaptureFixture[str]) -> None:
    def step(epoch: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, str]:
        return np.array([1.0, 2.0], dtype=np.float32) * (int(index[0]) + 1), "extra"

    Model(step).train(1, FakeDataset(4), callbacks=[LossMonitor(per_print_times=2)])
    # the first output is the loss; an array loss prints as its mean
    assert capsys.readouterr().out.splitlines() == [
        "epoch: 1 step: 2, loss is 3.0",
        "epoch: 1 step: 4, loss is 6.0",
    ]


def test_loss_monitor_stops_on_nan_and_the_producer_shuts_down() -> None:
    ds = FakeDataset(1000)
    with pytest.raises(ValueError, match=re.escape("epoch: 1 step: 2. Invalid loss")):
        Model(lambda e, i: float("nan")).train(
            3, ds, callbacks=[LossMonitor()], dataset_sink_mode=True, sink_size=2
        )
    assert ds.iterators[0].stopped


def test_time_monitor_prints_once_per_epoch(capsys: pytest.CaptureFixture[str]) -> None:
    Model(Seen()).train(
        3, FakeDataset(5), callbacks=TimeMonitor(data_time=True), dataset_sink_mode=True
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    for line in lines:
        assert re.fullmatch(
            r"Train epoch time: \d+\.\d{3} ms, per step time: \d+\.\d{3} ms, "
            r"avg data time: \d+\.\d{3} ms",
            line,
        )


# -- errors and shutdown ---------------------------------------------------------------


@pytest.mark.parametrize("error", [RuntimeError("step failed"), KeyboardInterrupt()])
def test_step_error_stops_the_producer(error: BaseException) -> None:
    produced: list[int] = []
    ds = FakeDataset(1000, after_batch=lambda e, i: produced.append(i))

    def step(epoch: np.ndarray, index: np.ndarray) -> float:
        if int(index[0]) == 5:
            raise error
        return 0.0

    with pytest.raises(type(error)):
        Model(step, queue_capacity=3).train(1, ds, dataset_sink_mode=True)
    assert ds.iterators[0].stopped
    # at most: 6 taken by the step, 3 in the queue, 1 being pushed
    assert len(produced) <= 6 + 3 + 1


def test_dataset_error_in_sink_mode_reaches_the_caller() -> None:
    def bad(epoch: int, index: int) -> None:
        if index == 3:
            raise OSError("disk gone")

    step = Seen()
    with pytest.raises(OSError, match="disk gone"):
        Model(step).train(2, FakeDataset(5, before_batch=bad), dataset_sink_mode=True)
    assert len(step.seen) == 3


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"sink_size": 0}, ArgumentError, "'sink_size' must be -1 or positive, but got 0"),
        ({"sink_size": -2}, ArgumentError, "'sink_size' must be -1 or positive, but got -2"),
        ({"epoch": 0}, ArgumentError, "'epoch' must be an int >= 1, got 0"),
        ({"initial_epoch": 2}, ArgumentError, "'initial_epoch' (2) must be less than 'epoch' (2)"),
        ({"callbacks": [object()]}, TypeError, "callbacks[0] must be a Callback"),
        ({"dataset_sink_mode": 1}, TypeError, "dataset_sink_mode must be a bool, got 1"),
    ],
)
def test_bad_train_arguments(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    args: dict[str, Any] = {"epoch": 2, "train_dataset": FakeDataset(3), "dataset_sink_mode": True}
    args.update(kwargs)
    with pytest.raises(error, match=re.escape(match)):
        Model(Seen()).train(**args)


class Unsized:
    """A re-iterable of batches with no length."""

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return iter([(np.array([0]), np.array([i])) for i in range(3)])


def test_unsized_iterable_needs_sink_size() -> None:
    with pytest.raises(ArgumentError, match="train_dataset has no size"):
        Model(Seen()).train(1, Unsized(), dataset_sink_mode=True)
    step = Seen()
    Model(step).train(2, Unsized(), dataset_sink_mode=True, sink_size=2)
    assert [i for _, i in step.seen] == [0, 1, 2, 0]


def test_plain_list_in_both_modes() -> None:
    batches = [(np.array([0]), np.array([i])) for i in range(4)]
    for sink in (False, True):
        step = Seen()
        Model(step).train(2, batches, dataset_sink_mode=sink)
        assert [i for _, i in step.seen] == [0, 1, 2, 3] * 2


def test_summary_accounts_for_every_step() -> None:
    summary = Model(Seen()).train(2, FakeDataset(5), dataset_sink_mode=True)
    assert (summary.steps, summary.epochs) == (10, 2)
    assert 0 <= summary.data_wait_s <= summary.total_s
    assert 0 <= summary.step_s <= summary.total_s
    text = str(summary)
    assert "waiting for data" in text and "in the step" in text
    assert "bottleneck" in text


# -- manual sink ---------------------------------------------------------------------------


def test_data_sink_runs_sink_size_steps_per_call_and_continues() -> None:
    step = Seen()
    with data_sink(step, FakeDataset(5), sink_size=3) as sink:
        results = [sink() for _ in range(4)]
        assert sink.summary().steps == 12
    assert results == [0.5] * 4
    assert step.seen == [(k // 5, k % 5) for k in range(12)]


def test_data_sink_rejects_bad_sink_size() -> None:
    with pytest.raises(ArgumentError, match="sink_size must be an int >= 1, got 0"):
        data_sink(Seen(), FakeDataset(5), sink_size=0)
