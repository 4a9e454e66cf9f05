"""Reading raw CIFAR-10 and MNIST files as pipeline sources (issue 10), mrecord vs MindSpore.

Run ``python -m benchmarks.bench_raw_sources [--files N] [--epochs E]``; with
``--mindspore-python PATH`` the same pipelines also run in MindSpore's interpreter.
Files are written once into ``bench_out/raw_sources/`` by ``mrecord/testing/rawdata.py``
(10,000 records per CIFAR-10 file, as MindSpore requires). Each side iterates
``Cifar10Dataset(shuffle=...).batch(256)`` and ``MnistDataset(...).batch(256)`` with
``output_numpy=True`` for ``E`` epochs and reports rows per second; one process per side.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

OUT = Path("bench_out/raw_sources")
REPO = Path(__file__).resolve().parent.parent


def _rawdata() -> Any:
    spec = importlib.util.spec_from_file_location(
        "rawdata", REPO / "mrecord" / "testing" / "rawdata.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prepare(files: int) -> dict[str, str]:
    """The CIFAR-10 folder (``files`` x 10,000 records) and an MNIST folder (60,000 rows)."""
    rawdata = _rawdata()
    cifar, mnist = OUT / f"cifar{files}", OUT / "mnist"
    if not (cifar / f"data_batch_{files}.bin").exists():
        rawdata.write_cifar10(cifar, {f"data_batch_{i}.bin": 10_000 for i in range(1, files + 1)})
    if not (mnist / "train-images-idx3-ubyte").exists():
        rawdata.write_mnist(mnist, {"train": 60_000})
    return {"cifar10": str(cifar), "mnist": str(mnist)}


def measure(api: Any, paths: dict[str, str], epochs: int) -> dict[str, float]:
    """Rows per second for each pipeline (after one warm-up epoch)."""
    results: dict[str, float] = {}
    pipelines: list[tuple[str, str, str, bool]] = [
        ("cifar10 in order", "Cifar10Dataset", "cifar10", False),
        ("cifar10 shuffled", "Cifar10Dataset", "cifar10", True),
        ("mnist shuffled", "MnistDataset", "mnist", True),
    ]
    for name, source, folder, shuffle in pipelines:
        dataset = getattr(api, source)(paths[folder], shuffle=shuffle).batch(256)
        it = dataset.create_tuple_iterator(num_epochs=epochs + 1, output_numpy=True)
        for _ in it:  # warm-up epoch: page cache, thread start
            pass
        rows = 0
        start = time.perf_counter()
        for _ in range(epochs):
            for image, _label in it:
                rows += len(image)
        results[name] = rows / (time.perf_counter() - start)
    return results


def _side(kind: str, paths_json: str, epochs: int) -> None:
    paths = json.loads(paths_json)
    if kind != "mindspore":
        sys.path.insert(0, str(REPO))
    api = importlib.import_module("mindspore.dataset" if kind == "mindspore" else "mrecord")
    print(json.dumps(measure(api, paths, epochs)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--mindspore-python", default=None)
    parser.add_argument("--side", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--paths", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side:
        _side(args.side, args.paths, args.epochs)
        return
    paths = json.dumps(prepare(args.files))
    sides = [("mrecord", sys.executable)]
    if args.mindspore_python:
        sides.append(("mindspore", args.mindspore_python))
    table: dict[str, dict[str, float]] = {}
    for kind, python in sides:
        cmd = [python, "-m", "benchmarks.bench_raw_sources", "--side", kind, "--paths", paths]
        cmd += ["--epochs", str(args.epochs)]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True)
        table[kind] = json.loads(done.stdout.strip().splitlines()[-1])
    for name in table["mrecord"]:
        cells = [f"{kind} {table[kind][name]:>10,.0f} rows/s" for kind in table]
        ratio = ""
        if "mindspore" in table:
            ratio = f"  ratio {table['mrecord'][name] / table['mindspore'][name]:.2f}x"
        print(f"{name:<18} " + "  ".join(cells) + ratio)


if __name__ == "__main__":
    main()
