"""DeviceQueue: delivery, bounds, GetNext timeout diagnostics, errors and shutdown."""

from __future__ import annotations

import gc
import json
import re
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import config
from mrecord.errors import ArgumentError, PipelineError, SinkTimeoutError
from mrecord.train import (
    DeviceQueue,
    NumpyDelivery,
    ProducerState,
    PushRecord,
    Situation,
    diagnose,
)
from mrecord.train.testing import FakeDataset

CASES = json.loads((Path(__file__).parents[1] / "cases" / "sink_cases.json").read_text())
TS = r"\d{4}-\d{2}-\d{2}-\d{2}:\d{2}:\d{2}\.\d{3}\.\d{3}"
SHORT = 0.2  # op_timeout for the stalled-producer tests; the producer is stalled on an Event


def sink_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("mrecord-sink-")]


@pytest.fixture(autouse=True)
def _no_threads_left() -> Iterator[None]:
    yield
    config.reset()
    for t in sink_threads():
        t.join(10)
    assert sink_threads() == []


def wait_for(cond: Callable[[], bool], what: str) -> None:
    """Poll ``cond`` (the producer thread makes progress on its own) for up to 10 s."""
    deadline = time.monotonic() + 10
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


def indices(batches: list[Any]) -> list[tuple[int, int]]:
    return [(int(b[0][0]), int(b[1][0])) for b in batches]


# -- delivery -------------------------------------------------------------------------


def test_delivers_every_batch_in_order_then_is_exhausted() -> None:
    ds = FakeDataset(4)
    with DeviceQueue(ds, num_epochs=2) as q:
        got = [q.get_next() for _ in range(8)]
        with pytest.raises(PipelineError, match="exhausted: all 8 batches"):
            q.get_next()
    assert indices(got) == [(e, i) for e in range(2) for i in range(4)]
    assert ds.requested_epochs == [2]


def test_num_batches_continues_across_passes_and_iterating_yields_all() -> None:
    ds = FakeDataset(3, continuous=True)
    with DeviceQueue(ds, num_batches=7) as q:
        got = list(q)
    assert indices(got) == [(k // 3, k % 3) for k in range(7)]
    assert ds.requested_epochs == [3]  # ceil(7 / 3) passes asked of the pipeline
    assert ds.iterators[0].stopped  # the pipeline iterator was stopped after batch 7


def test_plain_reiterable_of_batches() -> None:
    batches = [(np.full(2, i),) for i in range(3)]
    with DeviceQueue(batches, num_epochs=2) as q:
        got = [int(b[0][0]) for b in q]
    assert got == [0, 1, 2, 0, 1, 2]


def test_one_shot_iterator_is_rejected() -> None:
    with pytest.raises(ArgumentError, match="one-shot iterator"):
        DeviceQueue(iter([(np.zeros(1),)]))


def test_not_a_dataset_is_rejected() -> None:
    with pytest.raises(ArgumentError, match=r"dataset must be .* got 3"):
        DeviceQueue(3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_epochs": 2, "num_batches": 3}, "either num_epochs=2 or num_batches=3"),
        ({"num_epochs": 0}, "num_epochs must be -1 or an int >= 1, got 0"),
        ({"num_batches": -1}, "num_batches must be an int >= 0, got -1"),
        ({"capacity": 0}, "capacity must be an int >= 1, got 0"),
        ({"op_timeout": 0}, "op_timeout must be a number of seconds > 0, got 0"),
        ({"device": "cpu", "delivery": NumpyDelivery()}, "either device='cpu' or delivery="),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ArgumentError, match=re.escape(match)):
        DeviceQueue(FakeDataset(2), **kwargs)


def test_capacity_bounds_how_far_the_producer_runs_ahead() -> None:
    produced: list[int] = []
    ds = FakeDataset(50, after_batch=lambda e, i: produced.append(i))
    with DeviceQueue(ds, capacity=2) as q:
        # Nobody consumes: two batches fill the queue, the third push blocks on it.
        wait_for(lambda: q.state().push_in_progress and q.size() == 2, "the queue to fill")
        state = q.state()
        assert state.preprocess_batch == 2
        assert len(produced) == 3
        assert max(p.queue_size for p in state.pushes) <= 2
        first = q.get_next()
    assert indices([first]) == [(0, 0)]


def test_op_timeout_defaults_to_config() -> None:
    assert DeviceQueue(FakeDataset(1)).op_timeout == 1900.0
    config.set_op_timeout(12.5)
    assert DeviceQueue(FakeDataset(1)).op_timeout == 12.5


# -- GetNext timeout diagnostics -----------------------------------------------------


class StallingDelivery(NumpyDelivery):
    """A delivery whose ``send`` of batch ``at`` blocks until ``release`` is set."""

    def __init__(self, at: int, release: threading.Event) -> None:
        self.at, self.release, self.sent = at, release, 0

    def send(self, batch: Any) -> Any:
        if self.sent == self.at:
            self.release.wait()
        self.sent += 1
        return batch


def stall_preprocessing_at(n: int, release: threading.Event, size: int = 10) -> FakeDataset:
    def before(epoch: int, index: int) -> None:
        if index == n:
            release.wait()

    return FakeDataset(size, before_batch=before)


def timeout_text(q: DeviceQueue, take: int, release: threading.Event) -> str:
    try:
        for _ in range(take):
            q.get_next()
        with pytest.raises(SinkTimeoutError) as info:
            q.get_next(SHORT)
        return str(info.value)
    finally:
        release.set()
        assert q.stop()


def test_timeout_when_nothing_was_produced() -> None:
    release = threading.Event()
    q = DeviceQueue(stall_preprocessing_at(0, release), queue_name="q1")
    text = timeout_text(q, 0, release)
    assert "device queue 'q1' timed out" in text
    assert f"op_timeout={SHORT:g} s" in text
    assert "Situation: nothing produced" in text
    assert "Iterate the dataset on its own" in text
    assert text.endswith("preprocess_batch: 0; batch_queue: ; push_start_time -> push_end_time")


def test_timeout_when_produced_but_not_sent() -> None:
    release = threading.Event()
    q = DeviceQueue(FakeDataset(10), delivery=StallingDelivery(0, release))
    text = timeout_text(q, 0, release)
    assert "Situation: produced but not sent" in text
    assert re.search(
        rf"preprocess_batch: 0; batch_queue: 0; push_start_time -> push_end_time\n{TS} ->\Z",
        text,
    )


def test_timeout_when_sending_and_waiting() -> None:
    release = threading.Event()
    q = DeviceQueue(FakeDataset(10), delivery=StallingDelivery(2, release))
    text = timeout_text(q, 2, release)
    assert "Situation: sending and waiting" in text
    assert "2 batches were sent and batch 3 is being sent" in text
    assert re.search(
        rf"preprocess_batch: 2; batch_queue: \d, \d, \d; push_start_time -> push_end_time\n"
        rf"{TS} -> {TS}\n{TS} -> {TS}\n{TS} ->\Z",
        text,
    )


def test_timeout_when_preprocessing_is_slow() -> None:
    release = threading.Event()
    q = DeviceQueue(stall_preprocessing_at(3, release), queue_name="slow")
    text = timeout_text(q, 3, release)
    assert "Situation: slow preprocessing" in text
    assert "batch 4 is still being preprocessed" in text
    assert "mrecord.config.set_op_timeout" in text
    assert "waiting for batch 4; 3 delivered so far" in text
    m = re.search(
        rf"preprocess_batch: 3; batch_queue: (\d), (\d), (\d); push_start_time -> push_end_time\n"
        rf"({TS}) -> ({TS})\n({TS}) -> ({TS})\n({TS}) -> ({TS})\Z",
        text,
    )
    assert m is not None
    stamps = [parse_ts(m.group(i)) for i in range(4, 10)]
    assert stamps == sorted(stamps)  # each push ends after it starts, pushes in order


def test_timeout_lists_only_the_most_recent_pushes() -> None:
    release = threading.Event()
    q = DeviceQueue(stall_preprocessing_at(15, release, size=20), history=4)
    text = timeout_text(q, 15, release)
    state_lines = text.split("Producer state:\n")[1].splitlines()
    assert state_lines[0].startswith("preprocess_batch: 15; batch_queue: ")
    assert len(state_lines[0].split("batch_queue: ")[1].split(";")[0].split(", ")) == 4
    assert len(state_lines) == 1 + 4


def test_config_op_timeout_is_used_by_get_next() -> None:
    config.set_op_timeout(SHORT)
    release = threading.Event()
    q = DeviceQueue(stall_preprocessing_at(0, release))
    try:
        with pytest.raises(SinkTimeoutError, match=rf"op_timeout={SHORT:g} s"):
            q.get_next()
    finally:
        release.set()
        q.stop()


def parse_ts(text: str) -> float:
    head, ms, us = text.rsplit(".", 2)
    return datetime.strptime(head, "%Y-%m-%d-%H:%M:%S").timestamp() + int(ms) / 1e3 + int(us) / 1e6


def parse_state(log: str) -> ProducerState:
    lines = log.split("\n")
    m = re.fullmatch(
        r"preprocess_batch: (\d+); batch_queue: ([\d, ]*); push_start_time -> push_end_time",
        lines[0],
    )
    assert m is not None
    sizes = [int(s) for s in m.group(2).split(", ")] if m.group(2) else []
    pushes = []
    for size, line in zip(sizes, lines[1:], strict=True):
        start, _, end = line.partition(" ->")
        pushes.append(PushRecord(size, parse_ts(start), parse_ts(end.strip()) if end else None))
    return ProducerState("q", int(m.group(1)), tuple(pushes))


@pytest.mark.parametrize("case", CASES["getnext_states"]["cases"], ids=lambda c: c["situation"])
def test_faq_logs_round_trip_and_name_their_situation(case: dict[str, str]) -> None:
    state = parse_state(case["log"])
    assert state.format() == case["log"]
    assert diagnose(state) == Situation(case["situation"])


# -- errors and shutdown ---------------------------------------------------------------


def test_producer_error_reaches_consumer_with_traceback_after_earlier_batches() -> None:
    def exploding_preprocess(epoch: int, index: int) -> None:
        if index == 4:
            raise ValueError("bad sample at index 4")

    q = DeviceQueue(FakeDataset(10, before_batch=exploding_preprocess), queue_name="boom")
    got = []
    with pytest.raises(ValueError, match="bad sample at index 4") as info:
        while True:
            got.append(q.get_next())
    assert indices(got) == [(0, i) for i in range(4)]  # batches before the error arrive first
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "exploding_preprocess" in frames  # the producer's frames are kept
    notes = info.value.__notes__
    assert any("producer thread of device queue 'boom'" in n for n in notes)
    assert q.stop()


def test_stop_ends_a_producer_blocked_on_a_full_queue() -> None:
    ds = FakeDataset(1000)
    q = DeviceQueue(ds, capacity=1).start()
    wait_for(lambda: q.state().push_in_progress, "the producer to block")
    assert q.stop()
    assert ds.iterators[0].stopped
    with pytest.raises(PipelineError, match="was stopped"):
        q.get_next()


def test_abandoned_queue_stops_its_thread() -> None:
    q = DeviceQueue(FakeDataset(1000), capacity=1)
    q.get_next()
    (thread,) = sink_threads()
    del q
    gc.collect()
    thread.join(10)
    assert not thread.is_alive()


class _ConsumerClock:
    """``time`` for mrecord.train.device_queue whose ``perf_counter`` ticks one second per
    call on the consumer's (main) thread: the waits it measures are counts, not timings."""

    def __init__(self) -> None:
        self.now = 0.0
        self._main = threading.main_thread()

    def perf_counter(self) -> float:
        if threading.current_thread() is not self._main:
            return time.perf_counter()  # the producer's own accounting, untouched
        self.now += 1.0
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_wait_time_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    from mrecord.train import device_queue

    monkeypatch.setattr(device_queue, "time", _ConsumerClock())
    release = threading.Event()
    q = DeviceQueue(stall_preprocessing_at(1, release), capacity=4)
    timeout_text(q, 1, release)
    stats = q.stats()
    assert stats.delivered == 1
    # Two waits on the consumer's clock, one tick each: the batch delivered and the wait
    # that timed out (it counts as waiting for data too).
    assert stats.wait_s == 2.0
