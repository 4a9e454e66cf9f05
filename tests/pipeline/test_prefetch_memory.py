"""The pipeline's prefetch queue within the process's memory (issue 23's "never OOM-killed").

The iterator's prefetch thread keeps up to ``config.get_prefetch_size()`` (16) output
blocks ahead of the consumer. Counted in blocks only, a pipeline whose map makes big
values (a decode) ahead of ``batch`` held 16 batches: ``MindDataset`` of the bench's
images, a map to 150 KB arrays, ``batch(256)`` (38 MB a batch) and a consumer slower than
the reader was OOM-killed in a 763 MB memory group (2026-11-29). The queue and a map's
finished chunks now each also stop at an eighth of the memory budget (one block always
fits, and each map worker keeps one chunk).
"""

from __future__ import annotations

import textwrap
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from mrecord.background import END, Background
from mrecord.block import Block, block_nbytes
from mrecord.pipeline.ops.map import _Window
from tests.memory_groups import need_memory_groups, run_in_memory_group


def _block(rows: int, value_bytes: int) -> Block:
    return Block({"x": np.zeros((rows, value_bytes), dtype=np.uint8)})


def _state_becomes(queue: Background[int], want: tuple[int, int]) -> tuple[int, int]:
    """The queue's (items, weight) once it is ``want``, or what it is after 5 s (the
    producer thread may be slow to run on a loaded machine; a wrong state stays wrong)."""
    deadline = time.monotonic() + 5.0
    while True:
        state = (queue.qsize(), queue.weight)
        if state == want or time.monotonic() > deadline:
            return state
        time.sleep(0.01)


def test_a_weighed_queue_stops_at_its_bytes_and_always_takes_one_item() -> None:
    """Items of 40 under a cap of 100: two wait at most (a third would weigh 120); an
    item of 500 waits alone, taken once the queue is empty (else nothing heavier than
    the cap would ever pass)."""
    sizes = [40, 40, 40, 500, 40]

    def produce(put: Callable[[int], bool]) -> None:
        for size in sizes:
            if not put(size):
                return

    queue: Background[int] = Background(
        produce, capacity=16, name="test-weighed", weigh=lambda n: n, max_weight=100
    )
    queue.start()
    # (items, weight) waiting before each take, the producer blocked each time
    for want, size in zip([(2, 80), (2, 80), (1, 40), (1, 500), (1, 40)], sizes, strict=True):
        assert _state_becomes(queue, want) == want
        time.sleep(0.05)  # and it stays so: nothing more fits
        assert (queue.qsize(), queue.weight) == want
        assert queue.get(timeout=5) == size
    assert queue.get(timeout=5) is END


def test_the_queue_counts_held_weight_back_down() -> None:
    done = threading.Event()

    def produce(put: Callable[[int], bool]) -> None:
        put(6)
        put(6)  # waits until the first is taken: 12 > 10
        done.set()

    queue: Background[int] = Background(
        produce, capacity=4, name="test-weight", weigh=lambda n: n, max_weight=10
    )
    assert queue.weight == 0
    queue.start()
    assert _state_becomes(queue, (1, 6)) == (1, 6)
    assert not done.wait(0.1)
    assert queue.get(timeout=5) == 6
    assert done.wait(5) and _state_becomes(queue, (1, 6)) == (1, 6)
    assert queue.get(timeout=5) == 6 and queue.weight == 0


def test_block_nbytes_counts_arrays_lists_and_objects() -> None:
    assert block_nbytes(_block(10, 1000)) == 10_000
    ragged = Block({"pts": [np.zeros((k, 4), np.float32) for k in range(1, 101)]})
    assert 0.8 * 80_800 <= block_nbytes(ragged) <= 1.25 * 80_800 + 100 * 8
    blobs = np.empty(50, dtype=object)
    blobs[:] = [b"x" * 2000] * 50
    assert 100_000 <= block_nbytes(Block({"b": blobs})) <= 101_000
    assert block_nbytes(Block({"s": ["abc"] * 10})) >= 30
    assert block_nbytes(Block({"e": np.zeros(0, dtype=object)})) == 0


def test_a_maps_window_holds_what_its_share_of_the_budget_fits() -> None:
    """The workers' chunks until a result is seen, then as many results of its size as
    the budget holds (between the workers and the prefetch size); no budget: the
    prefetch size throughout."""
    window = _Window(16, 2, 100)
    assert window() == 2
    window.saw(_block(1, 30))
    assert window() == 3
    window.saw(_block(1, 1))
    assert window() == 16
    window.saw(_block(10, 100))
    assert window() == 2
    unbounded = _Window(16, 2, None)
    unbounded.saw(_block(10, 100))
    assert unbounded() == 16


_PIPELINE = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    from mrecord import GeneratorDataset
    batches, size, width = (int(a) for a in sys.argv[1:4])
    ds = GeneratorDataset(lambda: ((i,) for i in range(batches * size)), ["i"], shuffle=False)
    ds = ds.map(lambda i: np.full(width, int(i) % 251, np.uint8), input_columns=["i"])
    seen = bad = 0
    for (x,) in ds.batch(size).create_tuple_iterator(num_epochs=1, output_numpy=True):
        want = (np.arange(seen * size, seen * size + size) % 251).astype(np.uint8)
        if x.shape != (size, width) or not np.array_equal(x[:, -1], want):
            bad += 1
        seen += 1
        time.sleep(0.05)  # a training step: the pipeline gets ahead, the queue fills
    print(json.dumps({"bad": bad, "batches": seen}))
    """
)


@pytest.mark.parametrize(
    ("limit_mb", "batch", "value_bytes"),
    [
        # a decode (224 x 224 x 3): 38 MB batches; 16 queued are 616 MB, and the map's 16
        # finished chunks of 64 rows 154 MB more
        (500, 256, 150_528),
        # 256 KB values, 16 MB batches: the map's first 16 chunks (256 MB), made before
        # any result's size was known, killed it with both queues bounded in bytes
        (250, 64, 1 << 18),
    ],
)
def test_a_pipeline_of_big_batches_in_a_memory_group_is_not_killed(
    limit_mb: int, batch: int, value_bytes: int
) -> None:
    """A map making big values, ``batch`` behind a slow consumer, in a memory group the
    queues counted in blocks alone overrun. Every batch arrives, right, and the process
    lives."""
    need_memory_groups("a pipeline in a memory group")
    result = run_in_memory_group(limit_mb << 20, _PIPELINE, "30", str(batch), str(value_bytes))
    assert result == {"bad": 0, "batches": 30}
