"""Benchmark the data sink: overhead per batch, and sink (pipelined) vs series timing.

Run: ``python -m benchmarks.bench_sink [--batches N] [--repeats R]``.

1. **Overhead**: batches of 256x3x32x32 float32, produced by a small numpy pipeline
   (uint8 HWC images -> float32, rescale, HWC->CHW), consumed by a trivial step,
   once by iterating the pipeline directly and once through the sink
   (``Model.train(dataset_sink_mode=True)``). Target: the sink costs <= 5% more.
2. **Sink vs series** with a step that sleeps a known time ``s`` per batch and data
   that costs ``d`` per batch (a sleep, then the real numpy pipeline): the sink's total
   should be within 10% of ``N * max(d, s)``, series within 10% of ``N * (d + s)``.
3. **Host-to-device** (only with torch and CUDA): GB/s of the torch delivery path.

Every number is the median of ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from mrecord.train import DeviceQueue, Model
from mrecord.train.testing import FakeDataset

BATCH_SHAPE = (256, 3, 32, 32)


def image_pipeline(num_batches: int) -> FakeDataset:
    """Batches of 256 CIFAR-like images, built with vectorized numpy like a real pipeline."""
    rng = np.random.default_rng(0)
    pool = rng.integers(0, 256, size=(1024, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=1024, dtype=np.int32)

    def make(epoch: int, index: int) -> tuple[np.ndarray, np.ndarray]:
        start = (index * 256) % (1024 - 256)
        hwc = pool[start : start + 256]
        image = np.ascontiguousarray(hwc.transpose(0, 3, 1, 2), dtype=np.float32)
        image *= np.float32(1 / 255)
        return image, labels[start : start + 256]

    return FakeDataset(num_batches, make_batch=make, col_names=("image", "label"))


def sleeping_pipeline(num_batches: int, data_s: float) -> FakeDataset:
    """Batches that cost ``data_s`` of waiting each (I/O-like data)."""
    image = np.zeros(BATCH_SHAPE, dtype=np.float32)
    label = np.zeros(256, dtype=np.int32)

    def make(epoch: int, index: int) -> tuple[np.ndarray, np.ndarray]:
        time.sleep(data_s)
        return image, label

    return FakeDataset(num_batches, make_batch=make, col_names=("image", "label"))


def touch(image: np.ndarray, label: np.ndarray) -> float:
    """A trivial step: read one value so the batch is really used."""
    return float(image[0, 0, 0, 0])


def sleeper(step_s: float) -> Callable[..., float]:
    def step(image: np.ndarray, label: np.ndarray) -> float:
        time.sleep(step_s)
        return 0.0

    return step


def time_direct(ds: Any, step: Callable[..., Any]) -> float:
    t0 = time.perf_counter()
    for image, label in ds.create_tuple_iterator(num_epochs=1, output_numpy=True):
        step(image, label)
    return time.perf_counter() - t0


def time_train(ds: Any, step: Callable[..., Any], sink: bool) -> float:
    t0 = time.perf_counter()
    Model(step).train(1, ds, dataset_sink_mode=sink)
    return time.perf_counter() - t0


def median(fn: Callable[[], float], repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def interleaved(fns: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Median time of each function, run round-robin so that machine noise hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(fn())
    return {name: statistics.median(ts) for name, ts in times.items()}


def sleep_ms(seconds: float) -> float:
    """What ``time.sleep(seconds)`` really lasts here, in ms (sleeps overshoot a little)."""

    def once() -> float:
        t0 = time.perf_counter()
        time.sleep(seconds)
        return time.perf_counter() - t0

    return 1000 * median(once, 50)


def mrecord_pipeline(batches: int) -> Any:
    """The same kind of batches from mrecord's own pipeline, or None when not importable."""
    try:
        from mrecord.pipeline import NumpySlicesDataset
    except ImportError:
        return None
    rng = np.random.default_rng(0)
    images = rng.random((batches * 256, 3, 32, 32), dtype=np.float32)
    labels = rng.integers(0, 10, size=batches * 256, dtype=np.int32)
    ds = NumpySlicesDataset({"image": images, "label": labels}, shuffle=False)
    return ds.batch(256, drop_remainder=True)


def bench_overhead(batches: int, repeats: int) -> list[str]:
    rows = [
        "1. overhead per batch (256x3x32x32 float32, trivial step)",
        f"{'data: path':46}{'total s':>9}{'ms/batch':>10}{'overhead':>10}  target",
    ]
    sources: list[tuple[str, Any]] = [("numpy pipeline", image_pipeline(batches))]
    real = mrecord_pipeline(batches)
    if real is not None:
        sources.append(("NumpySlicesDataset.batch", real))
    for label, ds in sources:
        time_direct(ds, touch)  # warm up caches and the allocator
        t = interleaved(
            {
                "iterate directly": functools.partial(time_direct, ds, touch),
                "Model.train sink": functools.partial(time_train, ds, touch, True),
                "Model.train series": functools.partial(time_train, ds, touch, False),
            },
            repeats,
        )
        direct = t["iterate directly"]
        for name, total in t.items():
            over = (total - direct) / direct
            target = ""
            if name != "iterate directly":
                target = "ok" if over <= 0.05 else "MISSED <=5%"
            rows.append(
                f"{label + ': ' + name:46}{total:9.3f}{1000 * total / batches:10.3f}"
                f"{100 * over:9.1f}%  {target}"
            )
    empty = (np.zeros((1, 1, 1, 1), dtype=np.float32), np.zeros(1, dtype=np.int32))
    cheap = FakeDataset(20 * batches, make_batch=lambda e, i: empty)
    t = interleaved(
        {
            "direct": lambda: time_direct(cheap, touch),
            "sink": lambda: time_train(cheap, touch, True),
            "series": lambda: time_train(cheap, touch, False),
        },
        repeats,
    )
    n = 20 * batches
    rows.append(
        f"fixed cost per batch (empty batches): sink {1e6 * (t['sink'] - t['direct']) / n:.1f} us, "
        f"series {1e6 * (t['series'] - t['direct']) / n:.1f} us"
    )
    return rows


def bench_overlap(batches: int, repeats: int) -> list[str]:
    rows = [
        "2. sink vs series with a sleeping step of known length",
        f"{'data':>18}{'step ms':>9}{'mode':>8}{'total s':>9}{'expected s':>12}"
        f"{'ratio':>8}  target",
    ]
    real = image_pipeline(batches)
    time_direct(real, touch)
    real_ms = 1000 * median(lambda: time_direct(real, touch), repeats) / batches
    sleep_data_ms = sleep_ms(0.002)
    sleeping = sleeping_pipeline(batches, 0.002)
    label = f"sleep {sleep_data_ms:.2f} ms"
    cases: list[tuple[str, FakeDataset, float, float]] = [
        (label, sleeping, sleep_data_ms, 0.001),
        (label, sleeping, sleep_data_ms, 0.002),
        (label, sleeping, sleep_data_ms, 0.004),
        (f"numpy {real_ms:.2f} ms", real, real_ms, real_ms / 2000),
        (f"numpy {real_ms:.2f} ms", real, real_ms, real_ms * 2 / 1000),
    ]
    for label, ds, data_ms, step_s in cases:
        step = sleeper(step_s)
        step_ms = sleep_ms(step_s)  # the step's known length, as it really sleeps
        t = interleaved(
            {
                "sink": functools.partial(time_train, ds, step, True),
                "series": functools.partial(time_train, ds, step, False),
            },
            repeats,
        )
        for sink in (True, False):
            total = t["sink" if sink else "series"]
            per = max(data_ms, step_ms) if sink else data_ms + step_ms
            expected = batches * per / 1000
            ratio = total / expected
            ok = "ok" if abs(ratio - 1) <= 0.10 else "MISSED 10%"
            mode = "sink" if sink else "series"
            rows.append(
                f"{label:>18}{step_ms:9.2f}{mode:>8}{total:9.3f}{expected:12.3f}{ratio:8.3f}  {ok}"
            )
    return rows


def bench_h2d(batches: int, repeats: int) -> list[str]:
    try:
        import torch
    except ImportError:
        return ["3. host-to-device: skipped (torch is not installed)"]
    if not torch.cuda.is_available():
        return ["3. host-to-device: skipped (no CUDA device)"]
    ds = image_pipeline(batches)
    nbytes = int(np.prod(BATCH_SHAPE)) * 4 + 256 * 4
    rows = ["3. host-to-device through the torch delivery (GB/s of batch data)"]

    def through_queue(pin: bool) -> float:
        with DeviceQueue(ds, device="cuda", pin_memory=pin, num_epochs=1) as q:
            t0 = time.perf_counter()
            for image, _ in q:
                image.sum()
            torch.cuda.synchronize()
            return time.perf_counter() - t0

    def plain_copies() -> float:
        t0 = time.perf_counter()
        for image, label in ds.create_tuple_iterator(num_epochs=1):
            torch.from_numpy(image).to("cuda").sum()
            torch.from_numpy(label).to("cuda")
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    prebuilt = [batch for batch in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)]

    def delivery_only() -> float:
        # Batches made beforehand: the queue's own host-to-device rate.
        with DeviceQueue(prebuilt, device="cuda", num_epochs=1) as q:
            t0 = time.perf_counter()
            for image, _ in q:
                image.sum()
            torch.cuda.synchronize()
            return time.perf_counter() - t0

    through_queue(True)
    delivery_only()
    for name, fn in (
        ("sink alone (batches made beforehand)", delivery_only),
        ("pipeline + .to('cuda') in the loop", plain_copies),
        ("sink, pinned, side stream", lambda: through_queue(True)),
        ("sink, pageable", lambda: through_queue(False)),
    ):
        t = median(fn, repeats)
        rows.append(f"{name:40}{batches * nbytes / t / 1e9:8.2f} GB/s  ({t:.3f} s)")
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the three benchmarks and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200, help="batches per run")
    parser.add_argument("--repeats", type=int, default=5, help="runs per number (median)")
    args = parser.parse_args(argv)
    for section in (bench_overhead, bench_overlap, bench_h2d):
        print("\n".join(section(args.batches, args.repeats)), end="\n\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
