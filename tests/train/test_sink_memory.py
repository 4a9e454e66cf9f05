"""The device queue within the process's memory (issue 23's "never OOM-killed").

A ``DeviceQueue`` keeps up to ``capacity`` batches (``config.get_prefetch_size()``, 16)
delivered ahead of the training step. Counted in batches only, a pipeline making 38 MB
batches (a decode's 150 KB values, ``batch(256)``) behind a step slower than it held 16
of them on top of the pipeline's own queue: OOM-killed in a 500 MB memory group, where
the same pipeline iterated directly peaks at 311 MB (2026-11-29). The batches waiting in
host memory now also stop at an eighth of the memory budget (one always fits); batches
already on an accelerator weigh nothing here.
"""

from __future__ import annotations

import textwrap

import numpy as np

from mrecord.train.device_queue import host_bytes
from tests.memory_groups import need_memory_groups, run_in_memory_group


def test_host_bytes_counts_arrays_in_any_batch_shape() -> None:
    a = np.zeros((4, 10), np.uint8)
    b = np.zeros(5, np.float64)
    assert host_bytes([a, b]) == 80
    assert host_bytes((a, b)) == 80
    assert host_bytes({"a": a, "b": b}) == 80
    assert host_bytes(a) == 40
    assert host_bytes([a, "label", 3]) == 40


def test_host_bytes_leaves_out_what_lives_on_an_accelerator() -> None:
    class OnDevice:
        device = type("Device", (), {"type": "cuda"})()
        nbytes = 1 << 30

    class OnHost:
        device = type("Device", (), {"type": "cpu"})()
        nbytes = 1000

    assert host_bytes([OnDevice(), OnHost()]) == 1000


_SINK = textwrap.dedent(
    """
    import json, time
    import numpy as np
    from mrecord import GeneratorDataset
    from mrecord.train.device_queue import DeviceQueue
    batches = 30
    ds = GeneratorDataset(lambda: ((i,) for i in range(batches * 256)), ["i"], shuffle=False)
    ds = ds.map(lambda i: np.full(150_528, int(i) % 251, np.uint8), input_columns=["i"])
    queue = DeviceQueue(ds.batch(256), num_epochs=1)
    bad = 0
    for n in range(batches):
        (x,) = queue.get_next()
        want = (np.arange(n * 256, n * 256 + 256) % 251).astype(np.uint8)
        if x.shape != (256, 150_528) or not np.array_equal(x[:, -1], want):
            bad += 1
        time.sleep(0.05)  # the training step
    print(json.dumps({"bad": bad, "batches": batches}))
    """
)


def test_a_sink_of_big_batches_in_a_memory_group_is_not_killed() -> None:
    """The pipeline above behind a ``DeviceQueue`` (numpy delivery) and a slow step, in a
    600 MB group: 16 batches queued in the sink are 616 MB on their own (killed in 500 MB
    before; 448 MB peak there after). Every batch arrives, right, and the process lives."""
    need_memory_groups("a device queue in a 600 MB memory group")
    result = run_in_memory_group(600 << 20, _SINK)
    assert result == {"bad": 0, "batches": 30}
