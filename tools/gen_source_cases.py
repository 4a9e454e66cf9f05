"""Regenerate ``tests/cases/source_cases.json`` from real MindSpore (issue 10's raw sources).

Run with a ``mindspore==2.10.0`` interpreter (not mrecord's venv)::

    /work/msvenv/bin/python tools/gen_source_cases.py

The raw files are written by ``mrecord/testing/rawdata.py`` (loaded by path: it
needs only numpy and Pillow), whose ``observe`` builds each case's pipeline from
``mindspore.dataset`` here and from ``mrecord`` in ``tests/pipeline/test_source_cases.py``:
the same names, the same arguments. A case is ``{"name", "args", "expect"}`` or
``{"name", "args", "error", "message", "match"}`` (``match``: mrecord gives the same
message). CIFAR-10 files hold 10,000 records each because MindSpore refuses others.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("GLOG_v", "3")
_HERE = Path(__file__).resolve().parent
# tools/ holds csv.py and mindrecord.py: keep them from shadowing the modules MindSpore imports
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]


OUT = _HERE.parent / "tests" / "cases" / "source_cases.json"


def _load_rawdata() -> Any:
    path = _HERE.parent / "mrecord" / "testing" / "rawdata.py"
    spec = importlib.util.spec_from_file_location("rawdata", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seq(start: int | None = None, num: int | None = None, child: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "type": "SequentialSampler",
        "args": {"start_index": start, "num_samples": num},
    }
    if child:
        spec["child"] = child
    return spec


def dist(k: int, s: int, **kw: Any) -> dict[str, Any]:
    args = {"num_shards": k, "shard_id": s, "shuffle": False, **kw}
    return {"type": "DistributedSampler", "args": args}


Case = tuple[str, dict[str, Any], bool]


def source_cases(src: str, size: int) -> list[Case]:
    """The cases of one source (``size`` rows)."""
    cases: list[Case] = []

    def add(name: str, match: bool = False, **args: Any) -> None:
        cases.append((f"{src}_{name}", {"source": src, **args}, match))

    no = {"shuffle": False}
    add("meta", kwargs=no, read="meta")
    add("order", kwargs=no)
    if src != "imagefolder":
        for usage in ("train", "test", "all"):
            add(f"usage_{usage}", kwargs={**no, "usage": usage})
        add("err_usage", True, kwargs={"usage": "valid"})
    for k in (3, 7) if src == "cifar10" else (3, 5, size + 7):
        for s in sorted({0, 1, k - 1}):
            add(f"shard_{k}_{s}", kwargs={**no, "num_shards": k, "shard_id": s})
    add("num_samples", kwargs={**no, "num_samples": 5})
    add("num_samples_shard", kwargs={**no, "num_samples": 4, "num_shards": 3, "shard_id": 1})
    add("num_samples_over", kwargs={**no, "num_samples": 10**6})
    for name, sampler in (
        ("sequential", seq(2, 5)),
        ("subset", {"type": "SubsetSampler", "args": {"indices": [5, 1, 3, 1]}}),
        ("distributed", dist(3, 2)),
        ("distributed_num_samples", dist(3, 1, num_samples=2)),
        ("pk", {"type": "PKSampler", "args": {"num_val": 2}}),
        ("child", seq(1, 4, child=dist(2, 1))),
    ):
        add(f"sampler_{name}", sampler=sampler)
    add("use_sampler", kwargs=no, use_sampler=dist(2, 1))
    add("use_sampler_seq", kwargs={"num_samples": 5}, use_sampler=seq(3, 4))
    # shuffled: only what does not depend on the random generator
    add("shuffle_shard_size", kwargs={"num_shards": 3, "shard_id": 0}, read="meta")
    add("shuffle_is_permutation", read="sorted")
    add("shuffle_num_samples", kwargs={"num_samples": 7}, read="meta")
    # argument conflicts
    plain = {"type": "SequentialSampler"}
    add("err_sampler_shuffle", True, sampler=plain, kwargs={"shuffle": False})
    add("err_sampler_num_samples", True, sampler=plain, kwargs={"num_samples": 3})
    add("err_sampler_shards", True, sampler=plain, kwargs={"num_shards": 2, "shard_id": 0})
    add("err_shards_without_id", True, kwargs={"num_shards": 2})
    add("err_id_without_shards", True, kwargs={"shard_id": 0})
    add("err_shard_id_range", True, kwargs={"num_shards": 2, "shard_id": 2})
    add("err_shuffle_type", True, kwargs={"shuffle": "yes"})
    add("err_num_samples_negative", kwargs={"num_samples": -1})
    add("err_missing_dir", dataset_dir="/nonexistent/raw/data")
    if src == "imagefolder":
        indexing = {**no, "class_indexing": {"emu": 0, "cat": 7}}
        add("class_indexing", kwargs=indexing)
        add("class_indexing_meta", kwargs=indexing, read="meta")
        add("extensions", kwargs={**no, "extensions": [".png"]})
        add("raw_bytes_meta", kwargs={**no, "decode": False}, read="meta")
    return cases


def padded_batch_cases() -> list[Case]:
    """padded_batch on 7 rows of ragged columns ``a`` (1-D) and ``b`` (2-D)."""
    cases: list[Case] = []
    for name, kwargs in (
        ("all_largest", {"batch_size": 2, "pad_info": {}}),
        ("shape_and_value", {"batch_size": 3, "pad_info": {"a": ([6], -1), "b": (None, 0)}}),
        (
            "none_shape_value",
            {
                "batch_size": 2,
                "drop_remainder": True,
                "pad_info": {"a": (None, 9), "b": ([2, 2], 1)},
            },
        ),
        ("dim_none", {"batch_size": 4, "pad_info": {"a": (None, 0), "b": ([3, None], 5)}}),
        ("too_small", {"batch_size": 4, "pad_info": {"a": ([2], 0), "b": (None, 0)}}),
        ("unnamed_column", {"batch_size": 2, "pad_info": {"a": ([6], -1)}}),
    ):
        cases.append((f"padded_batch_{name}", {"source": "ragged", "kwargs": kwargs}, False))
    return cases


def case_args() -> list[Case]:
    """``(name, args, match_message)`` for every case."""
    sizes = {"cifar10": 20_000, "mnist": 23, "imagefolder": 12}
    cases = [c for src, n in sizes.items() for c in source_cases(src, n)]
    return cases + padded_batch_cases()


def first_line(exc: Exception) -> str:
    """MindSpore's message without its banner and C++ call stack."""
    lines = str(exc).split("\n")
    for line in lines:
        if line.startswith("[ERROR] "):
            return line[len("[ERROR] ") :].strip()
    kept = [m for m in lines if m.strip() and not m.startswith(("-", "["))]
    return (kept or lines)[0].strip()


def main() -> None:
    ds = importlib.import_module("mindspore.dataset")  # MindSpore's interpreter only
    rawdata = _load_rawdata()
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = rawdata.write_case_sources(tmp)
        for name, args, match in case_args():
            try:
                expect = rawdata.observe(ds, paths, args)
            except Exception as exc:  # record what MindSpore raised
                error = type(exc).__name__
                message = first_line(exc)
                out.append(
                    {"name": name, "args": args, "error": error, "message": message, "match": match}
                )
                continue
            out.append({"name": name, "args": args, "expect": expect})
            print(name, "ok", file=sys.stderr)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {len(out)} cases to {OUT}")


if __name__ == "__main__":
    main()
