"""mrecord.ray: reading through Ray Data, writing through the datasink, distributed conversion.

All Ray tests share one local cluster (the ``ray_cluster`` fixture, 2 CPUs). Ray does not
keep row order by default, so rows are compared after sorting by their ``id`` field.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray
from ray.data import DataContext

import mrecord.ray
from mrecord import DatasetReader, FileWriter, MindDataset, MindPage, Shuffle
from mrecord.convert import convert_imagefolder
from mrecord.errors import DatasetExistsError, RowValidationError
from mrecord.format.metadata import ShardMetadata
from mrecord.ray import MRecordDatasource, read_mrecord, write_mrecord
from mrecord.sampling import shuffle_order
from mrecord.storage.shard import ShardFile
from tests.convert.test_convert_sources import cifar_dir, image_folder

pytestmark = pytest.mark.usefixtures("ray_cluster")

SCHEMA_ID = {"id": {"type": "int64"}}

SCHEMA: dict[str, Any] = {
    "id": {"type": "int64"},
    "label": {"type": "int32"},
    "score": {"type": "float16"},
    "flag": {"type": "bool"},
    "image": {"type": "uint8", "shape": [4, 5, 3]},
    "boxes": {"type": "float32", "shape": [-1, 4], "compression": "zstd"},
    "blob": {"type": "bytes"},
    "name": {"type": "string"},
}


def make_rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "id": i,
            "label": int(rng.integers(-5, 5)),
            "score": np.float16(rng.random()),
            "flag": bool(i % 3 == 0),
            "image": rng.integers(0, 256, (4, 5, 3), dtype=np.uint8),
            "boxes": rng.random((i % 4, 4), dtype=np.float32),
            "blob": rng.bytes(i % 9),
            "name": "ñame-" * (i % 3) + str(i),
        }
        for i in range(n)
    ]


def write_dataset(path: Path, rows: list[dict[str, Any]], shard_num: int = 3) -> Path:
    with FileWriter(path, shard_num=shard_num, overwrite=True) as writer:
        writer.add_schema(SCHEMA)
        writer.add_index(["label"])
        writer.set_page_size(2048)
        writer.write_raw_data(rows)
    return writer.files[0]


def read_by_id(first: Path) -> list[dict[str, Any]]:
    with DatasetReader.open(first) as reader:
        return sorted(reader.iter_rows(), key=lambda r: int(r["id"]))


def assert_rows_equal(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert set(g) == set(w)
        for name, value in w.items():
            if isinstance(value, np.ndarray):
                assert isinstance(g[name], np.ndarray), name
                assert g[name].dtype == value.dtype and g[name].shape == value.shape, name
                np.testing.assert_array_equal(g[name], value)
            else:
                assert g[name] == value, (name, g[name], value)
                assert type(g[name]) is type(value) or isinstance(value, np.generic), name


def visible(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if not p.name.endswith(".mrecord-lock"))


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    directory = tmp_path_factory.mktemp("ray_source")
    first = write_dataset(directory / "src.mrecord", make_rows(240))
    return first, read_by_id(first)


def test_round_trip_every_field_kind(
    source: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    first, want = source
    ds = read_mrecord(first, override_num_blocks=5)
    batch = next(iter(ds.iter_batches(batch_format="numpy", batch_size=16)))
    assert batch["image"].shape == (16, 4, 5, 3) and batch["image"].dtype == np.uint8
    assert batch["score"].dtype == np.float16 and batch["flag"].dtype == np.bool_
    assert batch["label"].dtype == np.int32 and batch["id"].dtype == np.int64
    assert all(b.dtype == np.float32 and b.shape[1:] == (4,) for b in batch["boxes"])
    assert {type(v) for v in batch["blob"]} == {bytes}
    assert {type(v) for v in batch["name"]} == {str}
    out = tmp_path / "copy.mrecord"
    files = write_mrecord(ds, out, schema=SCHEMA, index_fields=["label"], shard_num="per_task")
    assert len(files) == 5  # one shard per read task (no repartition)
    got_first = files[0]
    assert_rows_equal(read_by_id(got_first), want)
    with DatasetReader.open(got_first) as reader:
        assert reader.schema.to_dict() == DatasetReader.open(first).schema.to_dict()


def test_schema_inferred_from_the_first_block(
    source: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    first, want = source
    columns = ["id", "image", "blob", "name", "score"]
    ds = read_mrecord(first, columns=columns, override_num_blocks=3)
    inferred = {
        "id": {"type": "int64"},
        "image": {"type": "uint8", "shape": [4, 5, 3]},
        "blob": {"type": "bytes"},
        "name": {"type": "string"},
        "score": {"type": "float16"},
    }
    # after a repartition the driver sees the first block's schema; written straight from the
    # read (one fused task each) every task infers it from its own first block
    for name, written in (("one", ds.repartition(1)), ("fused", ds)):
        files = write_mrecord(written, tmp_path / f"{name}.mrecord", shard_num="per_task")
        assert len(files) == (1 if name == "one" else 3)
        with DatasetReader.open(files[0]) as reader:
            assert reader.schema.to_dict() == inferred
        got = read_by_id(files[0])
        assert_rows_equal(got, [{k: r[k] for k in got[0]} for r in want])


def test_four_tasks_into_three_shards_one_dataset(
    source: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    first, want = source
    out = tmp_path / "three.mrecord"
    ds = read_mrecord(first, override_num_blocks=2).repartition(4)
    write_mrecord(ds, out, shard_num=3, schema=SCHEMA, index_fields=["label"])
    names = ["three.mrecord0", "three.mrecord1", "three.mrecord2"]
    assert visible(tmp_path) == sorted([*names, *(n + ".db" for n in names)])
    metas: list[ShardMetadata] = []
    for name in names:
        with ShardFile(tmp_path / name) as shard:
            metas.append(shard.meta)
    assert [m.shard_names for m in metas] == [tuple(names)] * 3
    assert [m.shard_index for m in metas] == [0, 1, 2]
    assert len({m.dataset_id for m in metas}) == 1
    counts = [m.num_rows for m in metas]
    assert sum(counts) == 240 and min(counts) > 0
    assert_rows_equal(read_by_id(tmp_path / names[1]), want)
    # the .db of every shard answers index lookups
    page = MindPage(str(tmp_path / names[0]))
    page.set_category_field("label")
    hits = page.read_at_page_by_name("3", 0, 1000)
    assert sorted(int(r["id"]) for r in hits) == [int(r["id"]) for r in want if r["label"] == 3]


def test_failed_task_publishes_nothing_and_keeps_the_old_dataset(
    source: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    first, _ = source
    old_rows = make_rows(12, seed=9)
    old_first = write_dataset(tmp_path / "kept.mrecord", old_rows, shard_num=3)
    old_read = read_by_id(old_first)
    assert [int(r["id"]) for r in old_read] == list(range(12))
    before = visible(tmp_path)

    def fail_on_row_100(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        # defined here: Ray's workers cannot import this test module, closures travel by value
        if 100 in batch["id"]:
            raise RuntimeError("task killed on purpose")
        return batch

    ds = read_mrecord(first, override_num_blocks=4).map_batches(fail_on_row_100)
    with pytest.raises(Exception, match="killed on purpose"):
        write_mrecord(ds, tmp_path / "kept.mrecord", shard_num=3, overwrite=True, schema=SCHEMA)
    assert visible(tmp_path) == before  # no staging files, no partials, no journal
    assert_rows_equal(read_by_id(old_first), old_read)


def test_block_that_does_not_fit_the_schema_fails_with_the_row_and_field(
    tmp_path: Path,
) -> None:
    ds = ray.data.from_items([{"x": 1}, {"x": 2}, {"x": 300}])
    where = r"write task \d+, block \d+: row 0, field 'x'.*300\)? is out of range for int8"
    with pytest.raises(RowValidationError, match=where):
        write_mrecord(ds, tmp_path / "bad.mrecord", schema={"x": {"type": "int8"}})
    assert visible(tmp_path) == []


def _read_tasks_in_process(
    source: MRecordDatasource, parallelism: int, ctx: Any = None
) -> list[Any]:
    tables: list[Any] = []
    for task in source.get_read_tasks(parallelism, data_context=ctx):
        tables.extend(task())
    return tables


def test_read_blocks_are_bounded(tmp_path: Path) -> None:
    rows = make_rows(400, seed=3)
    for r in rows:
        r["blob"] = bytes(3000)  # ~1.2 MB of bytes in all
    first = write_dataset(tmp_path / "big.mrecord", rows, shard_num=2)
    ctx = DataContext.get_current().copy()
    ctx.target_max_block_size = 64 << 10
    tables = _read_tasks_in_process(MRecordDatasource(first), 2, ctx)
    assert sum(t.num_rows for t in tables) == 400
    assert len(tables) > 10
    assert max(t.nbytes for t in tables) <= 64 << 10


def test_read_blocks_are_bounded_when_row_sizes_differ(tmp_path: Path) -> None:
    """Blocks are sized from the mean row; where big rows cluster, a block over the bound
    is cut until each piece fits (20 consecutive 40 KB rows among 380 of 100 bytes)."""
    rows = make_rows(400, seed=4)
    for i, r in enumerate(rows):
        r["blob"] = bytes(40_000 if 200 <= i < 220 else 100)
    first = write_dataset(tmp_path / "uneven.mrecord", rows, shard_num=1)
    ctx = DataContext.get_current().copy()
    ctx.target_max_block_size = 64 << 10
    tables = _read_tasks_in_process(MRecordDatasource(first), 1, ctx)
    assert sum(t.num_rows for t in tables) == 400
    assert max(t.nbytes for t in tables) <= 64 << 10
    blobs = [len(b) for t in tables for b in t.column("blob").to_pylist()]
    assert blobs == [len(r["blob"]) for r in rows]


def test_column_pruning_reads_fewer_bytes(
    source: tuple[Path, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, want = source
    touched: list[int] = []
    original = ShardFile.check_chunk

    def counting(self: ShardFile, page: int, col: int) -> None:
        touched.append(int(self.meta.chunks[page, col]["length"]))
        original(self, page, col)

    monkeypatch.setattr(ShardFile, "check_chunk", counting)
    tables = _read_tasks_in_process(MRecordDatasource(first, verify="always"), 3)
    everything = sum(touched)
    assert sum(t.num_rows for t in tables) == len(want)
    touched.clear()
    pruned = _read_tasks_in_process(MRecordDatasource(first, columns=["label"], verify="always"), 3)
    assert [t.column_names for t in pruned] == [["label"]] * len(pruned)
    assert 0 < sum(touched) < everything / 20
    ds = read_mrecord(first).select_columns(["name"])
    assert ds.schema().names == ["name"]
    assert sorted(ds.to_pandas()["name"]) == sorted(r["name"] for r in want)


def test_streaming_split_covers_every_row_once(
    source: tuple[Path, list[dict[str, Any]]],
) -> None:
    first, want = source
    splits = read_mrecord(first, columns=["id"], override_num_blocks=6).streaming_split(2)
    seen: list[list[int]] = [[], []]

    def consume(rank: int) -> None:
        for batch in splits[rank].iter_batches(batch_size=32, batch_format="numpy"):
            seen[rank].extend(batch["id"].tolist())

    workers = [threading.Thread(target=consume, args=(rank,)) for rank in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(seen[0] + seen[1]) == [r["id"] for r in want]
    assert seen[0] and seen[1]


def test_global_shuffle_reads_in_mrecords_order(
    source: tuple[Path, list[dict[str, Any]]],
) -> None:
    first, _ = source
    ctx = DataContext.get_current()
    saved = ctx.execution_options.preserve_order
    ctx.execution_options.preserve_order = True
    try:
        ds = read_mrecord(
            first, columns=["id"], shuffle=Shuffle.GLOBAL, seed=7, override_num_blocks=3
        )
        ids = [int(r["id"]) for r in ds.iter_rows()]
    finally:
        ctx.execution_options.preserve_order = saved
    with DatasetReader.open(first) as reader:
        counts = reader.file_row_counts
        want = reader.read_rows(shuffle_order(Shuffle.GLOBAL, counts, 7, 0).to_array())
    assert ids == np.asarray(want.columns["id"]).tolist()
    assert ids != sorted(ids)
    # ... which is the order MindDataset reads for the same seed
    saved_seed = mrecord.config.get_seed()
    mrecord.config.set_seed(7)
    try:
        mind = MindDataset(str(first), columns_list=["id"], shuffle=Shuffle.GLOBAL)
        local = [int(r["id"]) for r in mind.create_dict_iterator(num_epochs=1, output_numpy=True)]
    finally:
        mrecord.config.set_seed(saved_seed)
    assert ids == local


def _all_rows(first: Path) -> list[dict[str, Any]]:
    with DatasetReader.open(first) as reader:
        return list(reader.iter_rows())


def test_distributed_imagefolder_conversion_equals_the_single_process_one(tmp_path: Path) -> None:
    root, expect = image_folder(tmp_path)
    single = tmp_path / "single.mrecord"
    convert_imagefolder(root, single)
    out = tmp_path / "ray.mrecord"
    summary = mrecord.ray.convert("imagefolder", root, out, files_per_task=2, shard_num="per_task")
    # cat has 3 images (2 tasks), dog 1, emu 1: one shard per task, rows in the same order
    assert summary.rows == len(expect) and summary.shards == 4
    got = _all_rows(Path(summary.files[0]))
    assert [(r["file_name"], int(r["label"]), r["image"]) for r in got] == expect
    assert_rows_equal(got, _all_rows(single))
    with DatasetReader.open(summary.files[0]) as reader, DatasetReader.open(single) as want:
        assert reader.shards[0].meta.desc == want.shards[0].meta.desc
        assert reader.shards[0].meta.index_fields == ("label",)


def test_distributed_cifar10_conversion_into_two_shards(tmp_path: Path) -> None:
    expect = cifar_dir(tmp_path, np.random.default_rng(2), per_file=3)
    summary = mrecord.ray.convert("cifar10", tmp_path, tmp_path / "c.mrecord", shard_num=2)
    assert summary.rows == 15 and summary.shards == 2
    rows = _all_rows(Path(summary.files[0]))
    images = np.stack([r["image"] for r in rows])
    np.testing.assert_array_equal(images, np.stack(expect["train"][0]))
    assert [int(r["label"]) for r in rows] == expect["train"][1]


def test_distributed_mrecord_conversion_equals_the_single_process_one(tmp_path: Path) -> None:
    """``convert mrecord`` (an older dataset rewritten) with ``--engine ray``: the rows,
    in order, the schema, description and index fields of the local conversion."""
    from mrecord.convert import convert_mrecord

    src = write_dataset(tmp_path / "old.mrecord", make_rows(40), shard_num=2)
    single = convert_mrecord(src, tmp_path / "single.mrecord", shard_num=1)
    summary = mrecord.ray.convert("mrecord", src, tmp_path / "ray.mrecord", shard_num=1)
    assert summary.rows == single.rows == 40
    got, want = _all_rows(Path(summary.files[0])), _all_rows(Path(single.files[0]))
    assert [int(r["id"]) for r in got] == [int(r["id"]) for r in want]
    assert_rows_equal(got, want)
    with (
        DatasetReader.open(summary.files[0]) as reader,
        DatasetReader.open(single.files[0]) as local,
    ):
        assert reader.schema.names == local.schema.names
        assert reader.shards[0].meta.desc == local.shards[0].meta.desc
        assert reader.shards[0].meta.index_fields == local.shards[0].meta.index_fields


def test_cli_convert_engine_ray(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mrecord.cli.main import cli

    cifar_dir(tmp_path, np.random.default_rng(3), per_file=2)
    dst = tmp_path / "cli.mrecord"
    args = ["convert", "cifar10", str(tmp_path), str(dst), "--engine", "ray", "--json"]
    result = CliRunner().invoke(cli, [*args, "--compression", "zstd", "--shards", "2"])
    assert result.exit_code == 0, result.output
    with DatasetReader.open(Path(str(dst) + "0")) as reader:
        assert reader.num_rows == 10 and len(reader.files) == 2
        assert {f.compression for f in reader.schema.fields} == {"zstd"}


def test_existing_dataset_needs_overwrite_and_empty_input_writes_an_empty_dataset(
    tmp_path: Path,
) -> None:
    first = write_dataset(tmp_path / "here.mrecord", make_rows(6), shard_num=2)
    kept = read_by_id(first)
    ds = ray.data.from_items([{"id": 1}])
    with pytest.raises(DatasetExistsError, match="overwrite=True"):
        write_mrecord(ds, tmp_path / "here.mrecord", schema={"id": {"type": "int64"}})
    assert_rows_equal(read_by_id(first), kept)
    # overwrite with another shard count: the old shard files go once the new one is committed
    write_mrecord(ds, tmp_path / "here.mrecord", schema=SCHEMA_ID, overwrite=True)
    assert sorted(p.name for p in tmp_path.glob("here.mrecord*") if "lock" not in p.name) == [
        "here.mrecord",
        "here.mrecord.db",
    ]
    assert [int(r["id"]) for r in read_by_id(tmp_path / "here.mrecord")] == [1]
    empty = ds.limit(0)
    files = write_mrecord(empty, tmp_path / "none.mrecord", schema={"id": {"type": "int64"}})
    assert [f.name for f in files] == ["none.mrecord"]
    with DatasetReader.open(files[0]) as reader:
        assert reader.num_rows == 0 and reader.schema.names == ["id"]
    assert not [p for p in tmp_path.iterdir() if ".ray-" in p.name or "partial" in p.name]


_DRIVER = """
import os, signal, sys
import ray
from mrecord.ray import write_mrecord
from mrecord.storage import commit

def crash(step):
    if step == sys.argv[3]:
        os.kill(os.getpid(), signal.SIGKILL)

commit.crash_hook = crash
ray.init(address=sys.argv[1], log_to_driver=False)
ds = ray.data.from_items([{"id": i} for i in range(60)], override_num_blocks=3)
write_mrecord(ds, sys.argv[2], schema={"id": {"type": "int64"}}, shard_num=2, overwrite=True)
"""


@pytest.mark.parametrize("step", ["ray_assembled", "journal"])
def test_driver_killed_while_publishing_leaves_a_whole_dataset(tmp_path: Path, step: str) -> None:
    """A second driver on the shared cluster is SIGKILLed at ``step`` of its commit."""
    first = write_dataset(tmp_path / "d.mrecord", make_rows(6), shard_num=2)
    old = read_by_id(first)
    address = ray.get_runtime_context().gcs_address
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, address, str(tmp_path / "d.mrecord"), step],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == -9, proc.stderr[-2000:]
    rows = read_by_id(first)
    if step == "ray_assembled":  # before the commit point: the old dataset, untouched
        assert_rows_equal(rows, old)
        # the next write to the path removes the dead job's staging files
        again = ray.data.from_items([{"id": 7}])
        write_mrecord(again, tmp_path / "d.mrecord", schema=SCHEMA_ID, overwrite=True)
        assert not [p for p in tmp_path.iterdir() if ".ray-" in p.name]
    else:  # after it: the reader rolls the journal forward, the new dataset is whole
        assert [int(r["id"]) for r in rows] == list(range(60))


def test_the_driver_does_not_gather_the_index_values_of_every_row(tmp_path: Path) -> None:
    """Each write task sent its rows' index values to the driver, which held all of them
    to build the ``.db`` files: 300K 47-character names were 55 MB traced in the driver.
    The driver now reads them back from the assembled shards, a block at a time."""
    from tests.tracing import traced_peak

    rows = 300_000

    def named(batch: dict[str, np.ndarray]) -> dict[str, Any]:
        ids = batch["id"]
        return {
            "id": ids,
            "name": np.array([f"train/n{i % 1000:08d}/n{i % 1000:08d}_{i:09d}.JPEG" for i in ids]),
            "label": (ids % 1000).astype(np.int32),
        }

    ds = ray.data.range(rows, override_num_blocks=4).map_batches(named, batch_size=20_000)
    schema = {"id": {"type": "int64"}, "name": {"type": "string"}, "label": {"type": "int32"}}
    out = tmp_path / "names.mrecord"
    _, peak = traced_peak(
        lambda: write_mrecord(ds, out, shard_num=2, schema=schema, index_fields=["name", "label"])
    )
    assert peak < 24 << 20, f"the driver held {peak >> 20} MB"
    page = MindPage(str(tmp_path / "names.mrecord0"))
    page.set_category_field("name")
    (hit,) = page.read_at_page_by_name("train/n00000457/n00000457_000123457.JPEG", 0, 5)
    assert int(hit["id"]) == 123_457
    page.set_category_field("label")
    hits = page.read_at_page_by_name("7", 0, 1000)
    assert sorted(int(r["id"]) for r in hits) == list(range(7, rows, 1000))
