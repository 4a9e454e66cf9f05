"""Mosaic Streaming's side of ``bench_remote`` (run with an interpreter that has
``mosaicml-streaming``; mrecord is not imported here).

``python benchmarks/mosaic_side.py write DIR ROWS VALUE_BYTES``: the same rows as
bench_remote's dataset (same generator), as MDS shards in DIR.

``python benchmarks/mosaic_side.py epochs REMOTE LOCAL``: one cold epoch (empty LOCAL
cache) and one warm epoch (the same cache) of ``StreamingDataset(remote=REMOTE,
local=LOCAL, shuffle=True)``, iterated in this process; prints JSON. For ``s3://``
remotes the endpoint comes from ``S3_ENDPOINT_URL``.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def _stub_torchvision() -> None:
    """``import streaming`` imports its vision datasets, hence torchvision; the PyPI
    torchvision wheel does not load beside the CPU build of torch this machine has.
    Reading MDS never touches torchvision, so two names stand in for it."""
    import importlib.machinery
    import types

    class VisionDataset:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

    tv = types.ModuleType("torchvision")
    datasets = types.ModuleType("torchvision.datasets")
    datasets.VisionDataset = VisionDataset  # type: ignore[attr-defined]
    functional = types.ModuleType("torchvision.transforms.functional")
    functional.to_tensor = lambda image: image  # type: ignore[attr-defined]
    modules = {
        "torchvision": tv,
        "torchvision.datasets": datasets,
        "torchvision.transforms": types.ModuleType("torchvision.transforms"),
        "torchvision.transforms.functional": functional,
    }
    for name, module in modules.items():
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)  # find_spec() asks
    sys.modules.update(modules)


def write(folder: str, rows: int, value_bytes: int) -> None:
    from streaming import MDSWriter

    rng = np.random.default_rng(0)
    with MDSWriter(out=folder, columns={"data": "bytes", "label": "int"}, size_limit=1 << 26) as w:
        for i in range(rows):
            w.write({"data": rng.bytes(value_bytes), "label": i % 10})


def epoch(remote: str, local: str) -> tuple[float, int]:
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    start = time.perf_counter()
    ds = StreamingDataset(remote=remote, local=local, shuffle=True, shuffle_seed=1, batch_size=256)
    rows = sum(1 for _ in ds)
    return time.perf_counter() - start, rows


def main(argv: list[str]) -> None:
    try:
        import torchvision  # noqa: F401
    except Exception:  # a broken torchvision raises RuntimeError, not ImportError
        _stub_torchvision()
    if argv[0] == "write":
        write(argv[1], int(argv[2]), int(argv[3]))
        return
    cold, rows = epoch(argv[1], argv[2])
    warm, rows_warm = epoch(argv[1], argv[2])
    print(json.dumps({"cold": cold, "warm": warm, "rows": rows, "rows_warm": rows_warm}))


if __name__ == "__main__":
    main(sys.argv[1:])
