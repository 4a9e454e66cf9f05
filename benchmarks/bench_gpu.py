"""Benchmark the paths that end on a GPU (needs torch with CUDA; prints "skipped" otherwise).

Run: ``python -m benchmarks.bench_gpu [--scale 1.0] [--repeats 3]``.

1. **Sink, host-to-device**: ``bench_sink``'s third part (GB/s of 256x3x32x32 float32
   batches through ``DeviceQueue(device="cuda")``, pinned or not, against ``.to("cuda")``
   in the loop).
2. **CIFAR training pipeline to the GPU**: the ``cifar`` workload through
   ``benchmarks/pipelines.py``'s pipeline (decode, RandomCrop, flip, Rescale, Normalize,
   HWC2CHW; batches of 256), with ``offload`` off and on, delivered by
   ``DeviceQueue(device="cuda")`` to a step that reads each batch on the GPU; beside it the
   same pipeline on the CPU alone. Images/s.
3. **PyTorch**: ``StreamingDataset`` + ``StreamingDataLoader`` (``pin_memory=True``) over
   the same rows, 0 / 4 / 8 workers, each batch moved with ``.to("cuda",
   non_blocking=True)`` and its tail (scale, normalize, HWC->CHW) done there in torch; beside
   it the loader alone. Images/s.

Every number is the median of ``--repeats`` epochs after one warm-up epoch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import pipelines as P
from benchmarks import workloads as W
from benchmarks.bench_sink import bench_h2d


def _median(fn: Callable[[], int], repeats: int) -> tuple[int, float]:
    """(items, median seconds) of ``repeats`` runs of ``fn`` after one warm-up run."""
    fn()
    times = []
    items = 0
    for _ in range(repeats):
        start = time.perf_counter()
        items = fn()
        times.append(time.perf_counter() - start)
    return items, statistics.median(times)


def _write_cifar(path: Path, scale: float) -> None:
    from mrecord import FileWriter

    workload = W.get("cifar")
    with FileWriter(str(path), shard_num=4, overwrite=True) as writer:
        writer.add_schema(workload.schema, "cifar")
        for chunk in workload.chunks(scale):
            writer.write_raw_data(chunk)


def bench_pipeline_to_gpu(path: Path, repeats: int) -> list[str]:
    """Section 2: the CIFAR pipeline, on the CPU alone and delivered to the GPU."""
    import torch

    from mrecord.train import DeviceQueue

    api = P.mrecord_api()
    rows = ["2. CIFAR pipeline (batches of 256) delivered to the GPU, images/s"]
    for workers in (4, 8):
        for offload in (False, True):

            def on_cpu(workers: int = workers, offload: bool = offload) -> int:
                ds = P.cifar_pipeline(api, str(path), workers=workers, offload=offload)
                return sum(len(b[0]) for b in ds.create_tuple_iterator(num_epochs=1))

            def to_gpu(workers: int = workers, offload: bool = offload) -> int:
                ds = P.cifar_pipeline(api, str(path), workers=workers, offload=offload)
                n = 0
                with DeviceQueue(ds, device="cuda", num_epochs=1) as queue:
                    for image, _label in queue:
                        image.sum()  # the step reads the batch on the device
                        n += len(image)
                torch.cuda.synchronize()
                return n

            n, cpu_s = _median(on_cpu, repeats)
            _, gpu_s = _median(to_gpu, repeats)
            rows.append(
                f"   workers {workers}, offload {offload!s:5}: CPU pipeline {n / cpu_s:>10,.0f}"
                f"   to GPU {n / gpu_s:>10,.0f}   ({gpu_s / cpu_s - 1:+.1%})"
            )
    return rows


def bench_torch_to_gpu(path: Path, repeats: int) -> list[str]:
    """Section 3: StreamingDataLoader batches moved to the GPU, tail done there."""
    import torch

    from mrecord.torch import StreamingDataLoader, StreamingDataset

    mean = torch.tensor(P.CIFAR_MEAN, device="cuda").view(1, 3, 1, 1)
    std = torch.tensor(P.CIFAR_STD, device="cuda").view(1, 3, 1, 1)

    def decode(sample: dict[str, Any], rng: Any) -> dict[str, Any]:
        image = np.frombuffer(sample["image"], dtype=np.uint8).reshape(32, 32, 3)
        return {"image": image, "label": int(sample["label"])}

    rows = ["3. StreamingDataLoader (batch 256, pin_memory) to the GPU, images/s"]
    for workers in (0, 4, 8):
        # One loader per worker count, its workers kept between epochs: the figures are
        # steady-state epochs, not worker start-up.
        ds = StreamingDataset(str(path), seed=0, batch_size=256, transform=decode)
        loader = StreamingDataLoader(
            ds, num_workers=workers, pin_memory=True, persistent_workers=workers > 0
        )

        def alone(loader: Any = loader) -> int:
            return sum(len(batch["label"]) for batch in loader)

        def to_gpu(loader: Any = loader) -> int:
            n = 0
            for batch in loader:
                image = batch["image"].to("cuda", non_blocking=True)
                image = (image.permute(0, 3, 1, 2).float() / 255 - mean) / std
                image.sum()
                n += len(image)
            torch.cuda.synchronize()
            return n

        n, alone_s = _median(alone, repeats)
        _, gpu_s = _median(to_gpu, repeats)
        rows.append(
            f"   {workers} workers: loader alone {n / alone_s:>10,.0f}   to GPU + tail there "
            f"{n / gpu_s:>10,.0f}   ({gpu_s / alone_s - 1:+.1%})"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the three sections and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="of the cifar workload")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench_gpu: skipped (torch is not installed)")
        return 0
    if not torch.cuda.is_available():
        print("bench_gpu: skipped (no CUDA device)")
        return 0
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("\n".join(bench_h2d(200, 5)), end="\n\n", flush=True)
    with tempfile.TemporaryDirectory(prefix="mrecord-bench-gpu-") as tmp:
        path = Path(tmp) / "cifar.mrecord"
        _write_cifar(path, args.scale)
        first = path.with_name("cifar.mrecord0")
        print(f"cifar workload: {W.get('cifar').num_rows(args.scale):,} rows", flush=True)
        print("\n".join(bench_pipeline_to_gpu(first, args.repeats)), end="\n\n", flush=True)
        print("\n".join(bench_torch_to_gpu(first, args.repeats)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
