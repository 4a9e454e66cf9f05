"""``workers=N`` writes the dataset a serial conversion writes, byte for byte, for every kind.

Both runs get the same dataset id (``write_source(dataset_id=...)``; a new dataset's
id is otherwise random) and the same file name in sibling folders (the name is
stored in the metadata), so every data and ``.db`` byte must match.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrecord.convert import SOURCES, WriteOptions, write_source
from mrecord.errors import ConversionError
from mrecord.testing.rawdata import write_cifar10, write_image_folder, write_mnist

DATASET_ID = "5e" * 16


def convert(kind: str, src: Path, out: Path, workers: int, **options: Any) -> dict[str, bytes]:
    """Convert ``src`` into ``out/data.mrecord``; every file of the dataset with its bytes."""
    source_options = options.pop("source_options", {})
    out.mkdir(parents=True)
    dst = out / "data.mrecord"
    with SOURCES[kind](src, **source_options) as source:
        summary = write_source(
            source, dst, WriteOptions(workers=workers, **options), dataset_id=DATASET_ID
        )
    assert summary.workers == workers
    files = sorted(p for p in out.iterdir() if not p.name.endswith(".mrecord-lock"))
    assert files, "nothing written"
    return {p.name: p.read_bytes() for p in files}


def assert_same(kind: str, src: Path, tmp: Path, workers: int, **options: Any) -> None:
    serial = convert(kind, src, tmp / "serial", 1, **dict(options))
    parallel = convert(kind, src, tmp / f"parallel{workers}", workers, **dict(options))
    assert list(parallel) == list(serial)
    for name in serial:
        assert parallel[name] == serial[name], f"{name} differs with workers={workers}"


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    images=st.integers(1, 40),
    batch_rows=st.integers(1, 17),
    workers=st.integers(2, 3),
    shard_num=st.integers(1, 3),
    resize=st.sampled_from([None, (5, 4)]),
)
def test_imagefolder_parallel_equals_serial(
    tmp_path_factory: pytest.TempPathFactory,
    images: int,
    batch_rows: int,
    workers: int,
    shard_num: int,
    resize: tuple[int, int] | None,
) -> None:
    """Any size, batch size, shard count and worker count: the same bytes as serial."""
    tmp = tmp_path_factory.mktemp("images")
    counts = {"a": images // 3, "b": images - images // 3 - images // 4, "c": images // 4}
    write_image_folder(tmp / "src", {k: v for k, v in counts.items() if v})
    assert_same(
        "imagefolder",
        tmp / "src",
        tmp,
        workers,
        batch_rows=batch_rows,
        shard_num=shard_num,
        page_size=2048,
        source_options={"resize": resize},
    )


def test_imagefolder_bad_image_named_in_parallel(tmp_path: Path) -> None:
    """A bad file found by a worker process fails the conversion with its name, as serial."""
    write_image_folder(tmp_path / "src", {"a": 5, "b": 5})
    (tmp_path / "src" / "b" / "img0007.png").write_bytes(b"not an image")
    for workers in (1, 2):
        with pytest.raises(ConversionError, match=r"'b/img0007.png'"):
            convert("imagefolder", tmp_path / "src", tmp_path / str(workers), workers, batch_rows=3)
        assert not (tmp_path / str(workers) / "data.mrecord").exists()
    skipped = {
        w: convert(
            "imagefolder",
            tmp_path / "src",
            tmp_path / f"skip{w}",
            w,
            batch_rows=3,
            source_options={"on_error": "skip"},
        )
        for w in (1, 2)
    }
    assert skipped[1] == skipped[2]


def test_cifar10_png_parallel_equals_serial(tmp_path: Path) -> None:
    """CIFAR-10 with PNG encoding (the kind's CPU work, in processes) and as arrays."""
    write_cifar10(tmp_path / "src", {f"data_batch_{i}.bin": 7 for i in range(1, 6)})
    assert_same(
        "cifar10",
        tmp_path / "src",
        tmp_path / "png",
        2,
        batch_rows=9,
        source_options={"png": True},
    )
    assert_same("cifar10", tmp_path / "src", tmp_path / "raw", 2, batch_rows=9, shard_num=2)


def test_mnist_parallel_equals_serial(tmp_path: Path) -> None:
    write_mnist(tmp_path / "src", {"train": 23})
    assert_same("mnist", tmp_path / "src", tmp_path, 2, batch_rows=5, shard_num=2)


def test_csv_parallel_equals_serial(tmp_path: Path) -> None:
    src = tmp_path / "t.csv"
    src.write_text("id,name,score\n" + "".join(f"{i},n{i},{i / 3:.3f}\n" for i in range(31)))
    assert_same("csv", src, tmp_path, 2, batch_rows=4)


def test_npz_parallel_equals_serial(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    src = tmp_path / "a.npz"
    np.savez(src, x=rng.standard_normal((29, 3)).astype(np.float32), y=np.arange(29))
    assert_same("npz", src, tmp_path, 3, batch_rows=6, shard_num=3)


def test_mindrecord_parallel_equals_serial(tmp_path: Path) -> None:
    fixtures = Path(__file__).parents[1] / "fixtures" / "mindrecord"
    assert_same("mindrecord", fixtures / "images.mindrecord", tmp_path, 2, batch_rows=2)


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
def test_arrow_kinds_parallel_equal_serial(tmp_path: Path, kind: str) -> None:
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"id": list(range(25)), "text": [json.dumps({"i": i}) for i in range(25)]})
    if kind == "parquet":
        import pyarrow.parquet as pq

        src = tmp_path / "t.parquet"
        pq.write_table(table, src, row_group_size=7)
    else:
        src = tmp_path / "t.arrow"
        with pa.ipc.new_file(src, table.schema) as sink:
            sink.write_table(table, max_chunksize=6)
    assert_same(kind, src, tmp_path, 2, batch_rows=4)


def test_run_plan_keeps_to_the_plans_worker_cap() -> None:
    """A plan whose work gains nothing from more workers (``max_workers``) runs at most
    that many pieces at once however many are asked for; without a cap, all of them."""
    import threading
    import time

    from mrecord.convert.parallel import BatchPlan, run_plan

    running = [0]
    most = [0]
    lock = threading.Lock()

    def work(piece: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        return piece

    def plan(cap: int | None) -> BatchPlan[int, int]:
        return BatchPlan(
            num_batches=2,
            pieces=lambda b: list(range(8 * b, 8 * b + 8)),
            work=work,
            collect=lambda b, results: {"x": list(results)},
            finish=lambda: None,
            releases_gil=True,
            max_workers=cap,
        )

    batches = [batch for _b, batch in run_plan(plan(1), workers=4)]
    assert most[0] == 1
    assert [batch["x"] for batch in batches if batch] == [list(range(8)), list(range(8, 16))]
    most[0] = 0
    list(run_plan(plan(None), workers=4))
    assert most[0] == 4


def test_one_worker_works_in_the_calling_thread_with_pieces_prepared_ahead() -> None:
    """With one worker each piece's work runs in the thread that iterates (a worker thread
    would only trade the GIL with it at every system call), after the next pieces were
    prepared (a window ahead: their files asked for), and the batches come in order."""
    import threading

    from mrecord.convert.parallel import BatchPlan, run_plan

    events: list[tuple[str, int]] = []
    threads: set[str] = set()

    def work(piece: int) -> int:
        threads.add(threading.current_thread().name)
        events.append(("work", piece))
        return piece

    plan: BatchPlan[int, int] = BatchPlan(
        num_batches=3,
        pieces=lambda b: [] if b == 1 else [10 * b, 10 * b + 1],
        work=work,
        collect=lambda b, results: {"x": list(results)} if results else None,
        finish=lambda: events.append(("finish", 0)),
        releases_gil=True,
        prepare=lambda piece: events.append(("prepare", piece)),
    )
    batches = list(run_plan(plan, workers=1, window=2))
    assert threads == {threading.current_thread().name}
    assert batches == [(0, {"x": [0, 1]}), (1, None), (2, {"x": [20, 21]})]
    assert events == [
        ("prepare", 0),
        ("prepare", 1),
        ("work", 0),  # the empty batch 1 took the window's next place: nothing to prepare
        ("prepare", 20),
        ("work", 1),
        ("prepare", 21),
        ("work", 20),
        ("work", 21),
        ("finish", 0),
    ]


def test_imagefolder_writes_256_rows_at_a_time_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Image rows are whole files: by default a batch is 256 of them (bounded memory);
    other sources keep 4,096, and ``batch_rows`` given is kept."""
    from mrecord.writer.file_writer import FileWriter

    write_image_folder(tmp_path / "src", {"a": 300, "b": 300})
    sizes: list[int] = []
    real = FileWriter.write_raw_data

    def record(self: FileWriter, raw_data: Any, *args: Any, **kwargs: Any) -> None:
        sizes.append(len(next(iter(raw_data.values()))))
        real(self, raw_data, *args, **kwargs)

    monkeypatch.setattr(FileWriter, "write_raw_data", record)
    with SOURCES["imagefolder"](tmp_path / "src") as source:
        write_source(source, tmp_path / "a.mrecord", WriteOptions(workers=1))
    assert sizes == [256, 256, 88]
    sizes.clear()
    with SOURCES["imagefolder"](tmp_path / "src") as source:
        write_source(source, tmp_path / "b.mrecord", WriteOptions(workers=1, batch_rows=500))
    assert sizes == [500, 100]
    assert SOURCES["csv"].default_batch_rows == 4096  # type: ignore[attr-defined]


@pytest.mark.parametrize("check", ["structure", "decode", "none"])
def test_resizing_runs_in_processes_whatever_the_check(tmp_path: Path, check: str) -> None:
    """Resizing and re-encoding hold the GIL (Pillow's encoders): their plan never asks
    for threads, whichever check comes with it; the decode check alone does."""
    write_image_folder(tmp_path / "src", {"a": 3})
    for options in ({"resize": (4, 4)}, {"reencode": "png"}):
        with SOURCES["imagefolder"](tmp_path / "src", check=check, **options) as source:
            plan = source.plan()
            assert plan is not None
            assert not plan.releases_gil and plan.max_workers is None
    with SOURCES["imagefolder"](tmp_path / "src", check=check) as source:
        plan = source.plan()
        assert plan is not None and plan.releases_gil
        assert plan.max_workers == (None if check == "decode" else 1)
