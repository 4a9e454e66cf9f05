"""A PyTorch DataLoader epoch over mrecord vs Mosaic Streaming and LitData; resume cost.

Usage::

    python -m benchmarks.bench_torch                       # scale 0.1, peers if found
    python -m benchmarks.bench_torch --scale 0.25 --peer-python /work/peervenv-torch/bin/python
    python -m benchmarks.bench_torch --resume-rows 10000000

What is measured, each in its own subprocess (peak memory is per run):

- **epoch**: one shuffled epoch through ``torch.utils.data.DataLoader`` with 0 and 2
  workers, batches of 256 (tabular) or 32 (images), on the same rows
  (``benchmarks/workloads.py``) written by each system's own writer:
  ``mrecord.torch.StreamingDataset`` + ``StreamingDataLoader``, ``mrecord.torch.MapDataset``
  + DataLoader(shuffle=True) (``__getitems__``), Mosaic ``streaming.StreamingDataset``
  (MDS) and LitData ``litdata.StreamingDataset`` + ``StreamingDataLoader``. Samples/s from
  ``iter()`` to the last batch (worker start included) and the peak private memory of the
  process tree. Before each run the store's files are read once (page cache warm for every
  system) and written-back (``sync``); each configuration runs ``--repeat`` times (default
  3) and the median run counts, every run's rate printed and kept in the JSON
  (``runs_samples_per_s``) with the spread, so neither one load spike nor one lucky run on
  a shared machine decides a ratio. Every batch is read by the consumer (``touch``: one
  byte per 4 KiB page of each value). ``mrecord-samples`` is the StreamingDataset under a
  plain DataLoader (per-sample collation, like the peers, with
  ``collate_fn=mrecord.torch.collate``: torch's ``default_collate``, its batches sent to
  the main process through mrecord's shared-memory ring; ``mrecord-map`` likewise). Every
  mrecord row hands every byte of every sample to the main process (the bytes column
  arrives there as ``bytes``). All systems run in the
  same interpreter (``--peer-python``, a venv with ``torch==2.13.0``,
  ``mosaicml-streaming`` and ``litdata``) so torch and numpy match.
- **resume**: a ``--resume-rows``-row dataset; ``load_state_dict`` of a checkpoint half
  way through the epoch, then the first batch, timed (target < 1 s at 10M rows).

The peers' ``torchvision`` (a dependency of both, a CUDA build that cannot load next to
the CPU torch) is not needed here: Mosaic's vision submodule gets an empty stand-in.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import workloads as W
from benchmarks.measure import PeakRss, touch

REPO = Path(__file__).resolve().parent.parent
SYSTEMS = ("mrecord-stream", "mrecord-samples", "mrecord-map", "mosaic", "litdata")
"""mrecord-stream: StreamingDataLoader (batches collated in the worker from one read);
mrecord-samples: the same dataset under a plain DataLoader (per-sample collation, as the
peers, collate_fn=mrecord.torch.collate); mrecord-map: MapDataset + DataLoader(shuffle=True,
collate_fn=mrecord.torch.collate)."""
WORKLOADS = {"tabular": 256, "images": 32}
"""Workload -> batch size."""
WORKERS = (0, 2)


# --- writing -------------------------------------------------------------------------------


def _mosaic_columns(name: str) -> dict[str, str]:
    if name == "tabular":
        return {"id": "int64", "label": "int32", "vector": "ndarray:float32:16"}
    return {"data": "bytes", "label": "int32"}


def write(system: str, workload: str, scale: float, root: Path) -> None:
    """Write the workload's rows with ``system``'s own writer under ``root``."""
    w = W.get(workload)
    root.mkdir(parents=True, exist_ok=True)
    if system == "mrecord":
        from mrecord import FileWriter

        with FileWriter(root / "data.mrecord", shard_num=1, overwrite=True) as writer:
            writer.add_schema(w.schema)
            for chunk in w.chunks(scale):
                writer.write_raw_data(chunk)
        return
    rows = (row for chunk in w.chunks(scale) for row in W.to_rows(chunk))
    if system == "mosaic":
        _stub_torchvision()
        from streaming import MDSWriter

        with MDSWriter(out=str(root), columns=_mosaic_columns(workload)) as out:
            for row in rows:
                out.write(_numpy_row(row))
        return
    from litdata.streaming.writer import BinaryWriter

    bw = BinaryWriter(str(root), chunk_bytes="64MB")
    for i, row in enumerate(rows):
        bw.add_item(i, _numpy_row(row))
    bw.done()
    bw.merge()


def _numpy_row(row: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in row.items():
        if isinstance(v, int):
            out[k] = np.int64(v) if k == "id" else np.int32(v)
        else:
            out[k] = v
    return out


def _stub_torchvision() -> None:
    """Mosaic imports torchvision at import time for datasets this benchmark never uses."""
    import importlib.machinery
    import types

    def mod(name: str) -> Any:
        m = types.ModuleType(name)
        m.__spec__ = importlib.machinery.ModuleSpec(name, None)
        sys.modules[name] = m
        return m

    tv, ds, tr, fn = (
        mod(n)
        for n in (
            "torchvision",
            "torchvision.datasets",
            "torchvision.transforms",
            "torchvision.transforms.functional",
        )
    )
    ds.VisionDataset = object
    ds.CIFAR10 = object
    fn.to_tensor = None
    tv.datasets, tv.transforms, tr.functional = ds, tr, fn


# --- one epoch -----------------------------------------------------------------------------


def _loader(system: str, workload: str, root: Path, workers: int) -> Any:
    import torch

    batch = WORKLOADS[workload]
    if system == "mrecord-stream":
        from mrecord import Shuffle
        from mrecord.torch import StreamingDataLoader, StreamingDataset

        sds = StreamingDataset(
            str(root / "data.mrecord"), shuffle=Shuffle.GLOBAL, batch_size=batch, rank=0,
            world_size=1,
        )
        return StreamingDataLoader(sds, num_workers=workers)
    if system == "mrecord-samples":
        from mrecord import Shuffle
        from mrecord.torch import StreamingDataset, collate

        sds = StreamingDataset(
            str(root / "data.mrecord"), shuffle=Shuffle.GLOBAL, batch_size=batch, rank=0,
            world_size=1,
        )
        return torch.utils.data.DataLoader(
            sds, batch_size=batch, num_workers=workers, collate_fn=collate
        )
    if system == "mrecord-map":
        from mrecord.torch import MapDataset, collate

        mds = MapDataset(str(root / "data.mrecord"))
        return torch.utils.data.DataLoader(
            mds, batch_size=batch, shuffle=True, num_workers=workers, collate_fn=collate
        )
    if system == "mosaic":
        _stub_torchvision()
        import streaming
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        ds = streaming.StreamingDataset(local=str(root), shuffle=True, batch_size=batch)
        return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers)
    import litdata

    lds = litdata.StreamingDataset(str(root), shuffle=True)
    lit_collate = _collate_bytes if workload == "images" else None
    return litdata.StreamingDataLoader(
        lds, batch_size=batch, num_workers=workers, collate_fn=lit_collate
    )


def _collate_bytes(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """LitData's default collate cannot batch blobs of different sizes: keep them a list."""
    import torch

    return {
        "data": [s["data"] for s in samples],
        "label": torch.as_tensor(np.array([s["label"] for s in samples])),
    }


def epoch(system: str, workload: str, root: Path, workers: int) -> dict[str, Any]:
    """One epoch: samples, seconds, peak memory."""
    samples = 0
    with PeakRss() as rss:
        loader = _loader(system, workload, root, workers)
        t0 = time.perf_counter()
        for b in loader:
            touch(b)  # read what was delivered, on every system
            samples += len(b["label"])
        seconds = time.perf_counter() - t0
    return {
        "samples": samples,
        "seconds": round(seconds, 4),
        "samples_per_s": round(samples / seconds, 1),
        "peak_private_mb": round(rss.peak_private_mb, 1),
        "peak_rss_mb": round(rss.peak_mb, 1),
    }


# --- resume cost ---------------------------------------------------------------------------


def resume(rows: int, root: Path) -> dict[str, Any]:
    """Seconds from load_state_dict to the first batch, half way through a big epoch."""
    from mrecord import FileWriter
    from mrecord.torch import StreamingDataLoader, StreamingDataset

    path = root / f"rows{rows}.mrecord"
    if not (root / f"rows{rows}.mrecord0").exists():
        root.mkdir(parents=True, exist_ok=True)
        with FileWriter(path, shard_num=4, overwrite=True) as writer:
            writer.add_schema({"id": {"type": "int64"}, "label": {"type": "int32"}})
            for start in range(0, rows, 1_000_000):
                n = min(1_000_000, rows - start)
                ids = np.arange(start, start + n, dtype=np.int64)
                writer.write_raw_data({"id": ids, "label": (ids % 1000).astype(np.int32)})
    files = str(root / f"rows{rows}.mrecord0")  # its siblings are found from it
    out: dict[str, Any] = {"rows": rows}
    for workers in WORKERS:
        t0 = time.perf_counter()
        ds = StreamingDataset(files, batch_size=256, rank=0, world_size=1)
        loader = StreamingDataLoader(ds, num_workers=workers)
        opened = time.perf_counter() - t0
        if ds.spec.num_rows != rows:
            raise RuntimeError(f"{files} has {ds.spec.num_rows} rows, expected {rows}")
        state = loader.state_dict()
        state["samples_consumed"] = rows // 2
        t0 = time.perf_counter()
        loader.load_state_dict(state)
        first = next(iter(loader))
        if loader.state_dict()["samples_consumed"] != rows // 2 + 256:
            raise RuntimeError(f"the resume did not continue mid-epoch: {loader.state_dict()}")
        out[f"workers{workers}"] = {
            "open_s": round(opened, 4),
            "load_to_first_batch_s": round(time.perf_counter() - t0, 4),
            "first_ids": first["id"][:3].tolist(),
        }
    return out


# --- driver --------------------------------------------------------------------------------


def _child(python: str, args: list[str], timeout: float = 600) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO), env.get("PYTHONPATH", "")] if p)
    try:
        proc = subprocess.run(
            [python, "-m", "benchmarks.bench_torch", "--child", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no result after {timeout:.0f} s (killed)"}
    if proc.returncode != 0:
        return {"error": "\n".join(proc.stderr.strip().splitlines()[-4:])}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _warm(folder: Path) -> None:
    """Flush pending writes and read every file once: each system starts with a warm cache."""
    os.sync()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with open(path, "rb") as f:
                while f.read(1 << 24):
                    pass


def _has(python: str, module: str) -> bool:
    code = f"import importlib.util,sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", code], check=False).returncode == 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--peer-python", default=os.environ.get("MRECORD_BENCH_TORCH_PEERS"))
    parser.add_argument("--resume-rows", type=int, default=10_000_000)
    parser.add_argument("--out", type=Path, default=Path("bench_out") / "torch")
    parser.add_argument("--workloads", default="tabular,images")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per epoch run")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per configuration (median, all kept)"
    )
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "write":
            write(rest[0], rest[1], float(rest[2]), Path(rest[3]))
            result: dict[str, Any] = {"ok": True}
        elif kind == "epoch":
            result = epoch(rest[0], rest[1], Path(rest[2]), int(rest[3]))
        else:
            result = resume(int(rest[0]), Path(rest[1]))
        print(json.dumps(result))
        return 0

    python = args.peer_python or sys.executable
    peers = [p for p, mod in (("mosaic", "streaming"), ("litdata", "litdata")) if _has(python, mod)]
    missing = {"mosaic", "litdata"} - set(peers)
    print(f"interpreter: {python}; peers found: {peers or 'none'}", flush=True)
    if missing:
        print(f"not importable there (skipped): {sorted(missing)}", flush=True)
    out = args.out.resolve()
    report: dict[str, Any] = {"scale": args.scale, "python": python, "epochs": {}, "resume": {}}
    for workload in [w for w in args.workloads.split(",") if w]:
        rows = W.get(workload).num_rows(args.scale)
        print(f"== {workload}: {rows:,} rows, batch {WORKLOADS[workload]}", flush=True)
        for system in ["mrecord", *peers]:
            folder = out / workload / system
            shutil.rmtree(folder, ignore_errors=True)
            res = _child(python, ["write", system, workload, str(args.scale), str(folder)])
            if "error" in res:
                print(f"  write {system}: {res['error']}", flush=True)
        table: dict[str, Any] = {}
        for workers in WORKERS:
            for system in [*SYSTEMS[:3], *peers]:
                store = "mrecord" if system.startswith("mrecord") else system
                folder = out / workload / store
                runs = []
                for _ in range(max(1, args.repeat)):
                    _warm(folder)
                    runs.append(
                        _child(
                            python,
                            ["epoch", system, workload, str(folder), str(workers)],
                            args.timeout,
                        )
                    )
                    if "error" in runs[-1]:
                        break  # a hang or a crash does not get better on a second try
                ok = sorted(
                    (r for r in runs if "error" not in r), key=lambda r: r["samples_per_s"]
                )
                res = dict(ok[len(ok) // 2]) if ok else runs[-1]  # the median run
                rates = [round(r["samples_per_s"]) for r in ok]
                if ok:
                    res["runs_samples_per_s"] = rates
                table[f"{system}/w{workers}"] = res
                shown = (
                    res.get("error", "")[:200]
                    if "error" in res
                    else f"{res['samples_per_s']:>12,.0f} samples/s (median; runs "
                    f"{min(rates):,}-{max(rates):,})  "
                    f"{res['peak_private_mb']:>8,.0f} MB private  ({res['samples']} samples)"
                )
                print(f"  {system:<15} workers={workers}: {shown}", flush=True)
            best_peer = max(
                (table[f"{p}/w{workers}"].get("samples_per_s", 0) for p in peers), default=0
            )
            for system in SYSTEMS[:3]:
                mine = table[f"{system}/w{workers}"].get("samples_per_s", 0)
                if best_peer and mine:
                    print(f"  {system} / fastest peer (workers={workers}): "
                          f"{mine / best_peer:.2f}x", flush=True)
        report["epochs"][workload] = table
    if args.resume_rows:
        print(f"== resume cost at {args.resume_rows:,} rows", flush=True)
        res = _child(sys.executable, ["resume", str(args.resume_rows), str(out / "resume")])
        report["resume"] = res
        print(f"  {json.dumps(res)}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    (out / "results.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
