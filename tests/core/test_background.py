"""mrecord.background: the one producer-thread helper behind the iterator, prefetch and sink."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable

import pytest

from mrecord.background import END, Background, BackgroundStopped, BackgroundTimeout


def _numbers(n: int) -> Callable[[Callable[[int], bool]], None]:
    def produce(put: Callable[[int], bool]) -> None:
        for i in range(n):
            if not put(i):
                return

    return produce


def _drain(bg: Background[int]) -> list[int]:
    out = []
    while (item := bg.get()) is not END:
        out.append(item)
    return out


def test_items_arrive_in_order_then_end() -> None:
    bg: Background[int] = Background(_numbers(50), capacity=3, name="t-order")
    assert _drain(bg) == list(range(50))
    assert bg.get() is END  # stays at the end
    assert bg.stop()


def test_a_producer_error_comes_after_earlier_items_with_its_traceback() -> None:
    def failing_source(put: Callable[[int], bool]) -> None:
        put(1)
        put(2)
        raise KeyError("bad row 3")

    bg: Background[int] = Background(failing_source, capacity=5, name="t-fail")
    assert [bg.get(), bg.get()] == [1, 2]
    with pytest.raises(KeyError, match="bad row 3") as info:
        bg.get()
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "failing_source" in frames
    assert any("'t-fail'" in note for note in info.value.__notes__)


def test_stop_releases_a_producer_blocked_on_a_full_queue() -> None:
    bg: Background[int] = Background(_numbers(10**9), capacity=1, name="t-stop")
    assert bg.get() == 0
    assert bg.stop(timeout=30)
    assert not bg.alive
    with pytest.raises(BackgroundStopped):
        bg.get()


def test_a_shared_stop_event_set_elsewhere_stops_it() -> None:
    stop = threading.Event()
    bg: Background[int] = Background(_numbers(10**9), capacity=2, name="t-shared", stop=stop)
    assert bg.get() == 0
    stop.set()
    with pytest.raises(BackgroundStopped):
        bg.get()
    assert bg.stop(timeout=30)


def test_get_gives_up_after_its_timeout() -> None:
    release = threading.Event()

    def slow(put: Callable[[int], bool]) -> None:
        release.wait(30)
        put(7)

    bg: Background[int] = Background(slow, capacity=1, name="t-timeout")
    with pytest.raises(BackgroundTimeout):
        bg.get(timeout=0.01)
    release.set()
    assert bg.get() == 7
    assert bg.stop(timeout=30)
