"""``mrecord convert mrecord SRC DST``: an mrecord dataset rewritten by the current writer.

Expected rows come from the values the tests write, or from the generators the fixtures
were made with (``tests/fixtures/v1_1/``, ``tests/fixtures/v1_2/``), never from the code
under test.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from mrecord import FileWriter, MindPage
from mrecord.cli.main import cli
from mrecord.convert import WriteOptions, convert_mrecord, write_source
from mrecord.convert.mrecord_source import MrecordSource
from mrecord.errors import ArgumentError, ChecksumError
from mrecord.format.layout import FORMAT_MAJOR, FORMAT_MINOR
from mrecord.maintenance.verify import verify_dataset
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage.shard import read_shard_metadata

FIXTURES = Path(__file__).parents[1] / "fixtures"

SCHEMA: dict[str, dict[str, Any]] = {
    "label": {"type": "int32"},
    "id": {"type": "int64"},
    "score": {"type": "float64", "compression": "zstd"},
    "weight": {"type": "float32"},
    "small": {"type": "int8"},
    "flag": {"type": "bool"},
    "name": {"type": "string"},
    "blob": {"type": "bytes", "compression": "zstd"},
    "image": {"type": "bytes"},
    "grid": {"type": "float32", "shape": [2, 3]},
    "ragged": {"type": "int16", "shape": [-1]},
    "points": {"type": "uint8", "shape": [-1, 3], "compression": "zstd"},
}
DESC = json.dumps(
    {
        "source": "test",
        "features": {"label": {"class_names": ["cat", "dog", "emu"]}, "image": {"image": True}},
    }
)
INDEX = ["label", "name"]


def _row(i: int) -> dict[str, Any]:
    """Row ``i`` of the all-types dataset, derived from ``i`` alone."""
    rng = np.random.default_rng(i)
    return {
        "label": i % 3,
        "id": 10**12 + i,
        "score": i / 7,
        "weight": np.float32(i) / 3,
        "small": (i % 200) - 100,
        "flag": i % 2 == 0,
        "name": f"row-{i}-é",
        "blob": bytes([i % 256]) * (i % 5),
        "image": rng.integers(0, 256, 1100 + 13 * i, dtype=np.uint8).tobytes(),
        "grid": np.arange(6, dtype=np.float32).reshape(2, 3) * i,
        "ragged": np.arange(i % 4, dtype=np.int16) - i,
        "points": np.full((i % 3, 3), i % 256, dtype=np.uint8),
    }


def _write_all_types(path: Path, rows: int = 40, shards: int = 2) -> Path:
    """An all-types dataset of ``rows`` rows; returns its first shard file."""
    writer = FileWriter(path, shard_num=shards)
    writer.add_schema(SCHEMA, desc=DESC)
    writer.add_index(INDEX)
    writer.set_page_size(16 * 1024)
    writer.write_raw_data([_row(i) for i in range(rows)])
    writer.commit()
    return path.with_name(path.name + "0") if shards > 1 else path


def _rows(path: Path) -> list[dict[str, Any]]:
    with DatasetReader.open(path) as reader:
        return list(reader.iter_rows())


def _assert_rows_equal(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert set(g) == set(w), i
        for name, value in w.items():
            if isinstance(value, (bytes, str)):
                assert g[name] == value, (i, name)
            else:
                expected = np.asarray(value)
                assert np.asarray(g[name]).shape == expected.shape, (i, name)
                np.testing.assert_array_equal(g[name], expected, err_msg=f"{i} {name}")


def _metas(path: Path) -> list[Any]:
    with DatasetReader.open(path) as reader:
        return [s.meta for s in reader.shards]


def _run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_rows_schema_desc_and_index_carry_over(tmp_path: Path) -> None:
    """Every type, per-field compression, the description and the index fields survive;
    the shard count and page size are kept; MindPage lookups answer on the new dataset."""
    src = _write_all_types(tmp_path / "old.mrecord")
    summary = convert_mrecord(src, tmp_path / "new.mrecord")
    assert summary.kind == "mrecord" and summary.rows == 40 and summary.shards == 2
    new = tmp_path / "new.mrecord0"
    _assert_rows_equal(_rows(new), [_row(i) for i in range(40)])
    with DatasetReader.open(new) as reader:
        assert reader.schema.to_dict() == SCHEMA
    for meta in _metas(new):
        assert meta.desc == DESC
        assert list(meta.index_fields) == INDEX
        assert meta.page_size == 16 * 1024
        assert meta.format_version == (FORMAT_MAJOR, FORMAT_MINOR)
    page = MindPage(str(new))
    page.set_category_field("label")
    dogs = page.read_at_page_by_name(1, 0, 100)
    assert sorted(int(r["id"]) for r in dogs) == [10**12 + i for i in range(40) if i % 3 == 1]
    page.set_category_field("name")
    (hit,) = page.read_at_page_by_name("row-7-é", 0, 10)
    assert hit["image"] == _row(7)["image"]
    assert verify_dataset(new).ok


def _v1_1_row(i: int) -> dict[str, Any]:
    """``tests/fixtures/v1_1/make_fixtures_v1_1.py``'s row ``i``."""
    return {
        "id": i,
        "vec": np.arange(3, dtype=np.float32) + i,
        "blob": bytes([i % 256]) * (i % 7),
    }


def _v1_2_row(i: int) -> dict[str, Any]:
    """``tests/fixtures/v1_2/make_fixtures_v1_2.py``'s row ``i``."""
    return {
        "id": i,
        "label": i % 3,
        "name": f"img-{i:03d}",
        "image": (np.arange(1500 + 25 * i) * (i + 1) % 251).astype(np.uint8).tobytes(),
    }


@pytest.mark.parametrize(("name", "rows"), [("plain", 39), ("plain_sharded0", 21)])
def test_format_1_1_dataset_becomes_current(tmp_path: Path, name: str, rows: int) -> None:
    """A 1.1 dataset (one appended to in place, one of two shards) is rewritten in the
    current format with the same rows."""
    shutil.copytree(FIXTURES / "v1_1", tmp_path / "src", ignore=shutil.ignore_patterns("*.py"))
    src = tmp_path / "src" / name
    assert {m.format_version for m in _metas(src)} == {(1, 1)}
    convert_mrecord(src, tmp_path / "new")
    news = sorted(tmp_path.glob("new*[0-9]")) or [tmp_path / "new"]
    assert {m.format_version for m in _metas(news[0])} == {(FORMAT_MAJOR, FORMAT_MINOR)}
    assert len(news) == len(_metas(src))
    _assert_rows_equal(_rows(news[0]), [_v1_1_row(i) for i in range(rows)])
    assert verify_dataset(news[0]).ok


def _value_tables(path: Path, column: str) -> list[bool]:
    with DatasetReader.open(path) as reader:
        col = reader.schema.names.index(column)
        return [
            shard.has_value_crcs(page, col)
            for shard in reader.shards
            for page in range(shard.meta.num_pages)
        ]


def test_format_1_2_large_values_get_value_tables(tmp_path: Path) -> None:
    """A 1.2 dataset of large values has no value tables; rewritten, every chunk of its
    large values carries one (format 1.3), the rows are the fixture's and lookups work."""
    shutil.copytree(FIXTURES / "v1_2", tmp_path / "src", ignore=shutil.ignore_patterns("*.py"))
    src = tmp_path / "src" / "large0"
    assert {m.format_version for m in _metas(src)} == {(1, 2)}
    assert not any(_value_tables(src, "image"))
    convert_mrecord(src, tmp_path / "large")
    new = tmp_path / "large0"
    assert FORMAT_MINOR >= 3
    assert {m.format_version for m in _metas(new)} == {(FORMAT_MAJOR, FORMAT_MINOR)}
    tables = _value_tables(new, "image")
    assert tables and all(tables)
    _assert_rows_equal(_rows(new), [_v1_2_row(i) for i in range(24)])
    assert [m.page_size for m in _metas(new)] == [8192, 8192]
    page = MindPage(str(new))
    page.set_category_field("label")
    got = page.read_at_page_by_name(2, 0, 100)
    assert [int(r["id"]) for r in got] == [i for i in range(24) if i % 3 == 2]
    assert verify_dataset(new).ok


def test_shards_and_page_size_change_the_layout_not_the_rows(tmp_path: Path) -> None:
    src = _write_all_types(tmp_path / "old.mrecord", rows=60)
    result = _run(
        "convert", "mrecord", src, tmp_path / "three", "--shards", "3", "--page-size", "4K",
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["shards"] == 3
    metas = _metas(tmp_path / "three0")
    assert len(metas) == 3 and {m.page_size for m in metas} == {4096}
    old_pages = sum(m.num_pages for m in _metas(src))
    assert sum(m.num_pages for m in metas) > old_pages
    convert_mrecord(src, tmp_path / "one", shard_num=1)
    assert len(_metas(tmp_path / "one")) == 1
    want = [_row(i) for i in range(60)]
    _assert_rows_equal(_rows(tmp_path / "three0"), want)
    _assert_rows_equal(_rows(tmp_path / "one"), want)


@pytest.mark.parametrize(("rows", "shards", "batch_rows"), [(61, 3, 8), (40, 2, 5), (7, 4, 1)])
def test_kept_shard_count_keeps_every_row_id(
    tmp_path: Path, rows: int, shards: int, batch_rows: int
) -> None:
    """Each row goes back to its shard, at its global id, whatever the batch size: the
    rewritten dataset's shards hold the source shards' rows (ids, MindPage answers and
    saved positions stay valid)."""
    src = _write_all_types(tmp_path / "old.mrecord", rows=rows, shards=shards)
    # FileWriter splits each call across the shards: the source's global order is not
    # the order its rows were written in.
    before = _rows(src)
    convert_mrecord(src, tmp_path / "new", batch_rows=batch_rows)
    new = tmp_path / ("new0" if shards > 1 else "new")
    assert [m.num_rows for m in _metas(new)] == [m.num_rows for m in _metas(src)]
    assert [m.next_shard for m in _metas(new)] == [m.next_shard for m in _metas(src)]
    _assert_rows_equal(_rows(new), before)


def test_options_override_index_and_compression(tmp_path: Path) -> None:
    src = _write_all_types(tmp_path / "old.mrecord", rows=10, shards=1)
    convert_mrecord(src, tmp_path / "z", index_fields=[], compression="zstd")
    (meta,) = _metas(tmp_path / "z")
    assert meta.index_fields == ()
    assert {f.compression for f in meta.schema.fields} == {"zstd"}
    _assert_rows_equal(_rows(tmp_path / "z"), [_row(i) for i in range(10)])


def _files_bytes(folder: Path, pattern: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob(pattern))}


@pytest.mark.parametrize(
    ("dst_name", "shards"),
    [
        ("old.mrecord", None),  # the same files
        ("old.mrecord", 3),  # other files, but the same dataset name: its lock and journal
        ("old.mrecord", 1),
        ("old.mrecord0", 1),  # one of its shards
        ("old.mrecord1", 1),
    ],
)
def test_destination_being_the_source_is_refused(
    tmp_path: Path, dst_name: str, shards: int | None
) -> None:
    """Onto itself (even with overwrite) is refused naming both, and the source is left
    as it was."""
    src = _write_all_types(tmp_path / "old.mrecord", rows=12)
    before = _files_bytes(tmp_path, "*")
    options: dict[str, Any] = {} if shards is None else {"shard_num": shards}
    with pytest.raises(ArgumentError) as info:
        convert_mrecord(src, tmp_path / dst_name, overwrite=True, **options)
    message = str(info.value)
    assert repr(str(tmp_path / dst_name)) in message
    assert "old.mrecord0" in message and "old.mrecord1" in message
    assert "onto itself" in message and "another folder" in message
    assert _files_bytes(tmp_path, "*") == before
    args = ["--shards", str(shards)] if shards else []
    result = _run("convert", "mrecord", src, tmp_path / dst_name, "--overwrite", *args)
    assert result.exit_code == 2
    assert "is the dataset being converted" in result.stderr
    assert _files_bytes(tmp_path, "*") == before


def test_another_name_beside_the_source_is_allowed(tmp_path: Path) -> None:
    """``old.mrecord0`` as a base name of two shards writes ``old.mrecord00`` and
    ``old.mrecord01``: another dataset, so it is written."""
    src = _write_all_types(tmp_path / "old.mrecord", rows=12)
    convert_mrecord(src, tmp_path / "old.mrecord0")
    _assert_rows_equal(_rows(tmp_path / "old.mrecord00"), [_row(i) for i in range(12)])
    _assert_rows_equal(_rows(src), [_row(i) for i in range(12)])


def test_destination_through_a_link_is_refused(tmp_path: Path) -> None:
    src = _write_all_types(tmp_path / "old.mrecord", rows=5, shards=1)
    (tmp_path / "link").symlink_to(tmp_path)
    with pytest.raises(ArgumentError, match="onto itself"):
        convert_mrecord(src, tmp_path / "link" / "old.mrecord", overwrite=True)
    _assert_rows_equal(_rows(src), [_row(i) for i in range(5)])


def _damage_chunk(path: Path, page: int, column: str, at: int) -> None:
    """Flip one byte ``at`` bytes into chunk (``page``, ``column``) of shard ``path``."""
    meta = read_shard_metadata(path)
    col = meta.schema.names.index(column)
    offset = int(meta.chunks.reshape(meta.num_pages, -1)[page, col]["offset"])
    with open(path, "r+b") as f:
        f.seek(offset + at)
        byte = f.read(1)
        f.seek(offset + at)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("version", ["1.2 (chunk CRC)", "1.3 (value CRCs)"])
def test_damaged_source_stops_the_conversion(tmp_path: Path, version: str) -> None:
    """A damaged chunk raises the reader's ChecksumError naming the file; nothing is
    written at the destination."""
    if version.startswith("1.2"):
        shutil.copytree(FIXTURES / "v1_2", tmp_path / "src", ignore=shutil.ignore_patterns("*.py"))
    else:
        (tmp_path / "src").mkdir()
        convert_mrecord(FIXTURES / "v1_2" / "large0", tmp_path / "src" / "large")
        assert all(_value_tables(tmp_path / "src" / "large0", "image"))
    bad = tmp_path / "src" / "large1"
    _damage_chunk(bad, page=1, column="image", at=300)
    dst = tmp_path / "out" / "new"
    dst.parent.mkdir()
    with pytest.raises(ChecksumError, match="large1"):
        convert_mrecord(tmp_path / "src" / "large0", dst, batch_rows=5)
    left = [p.name for p in dst.parent.iterdir() if not p.name.endswith("-lock")]
    assert left == []


def test_worker_counts_write_the_same_bytes(tmp_path: Path) -> None:
    src = _write_all_types(tmp_path / "old.mrecord", rows=30)
    for workers in (1, 2):
        (tmp_path / f"w{workers}").mkdir()
        with MrecordSource(src) as source:
            options = WriteOptions(shard_num=2, workers=workers, batch_rows=7)
            write_source(source, tmp_path / f"w{workers}" / "d", options, dataset_id="ab" * 16)
    one = _files_bytes(tmp_path / "w1", "d*[0-9]*")
    assert one and one == _files_bytes(tmp_path / "w2", "d*[0-9]*")


def test_a_list_of_shards_is_a_source(tmp_path: Path) -> None:
    src = _write_all_types(tmp_path / "old.mrecord", rows=20)
    files = [src, tmp_path / "old.mrecord1"]
    convert_mrecord(files, tmp_path / "new", shard_num=1)
    _assert_rows_equal(_rows(tmp_path / "new"), [_row(i) for i in range(20)])


def test_help_lists_the_kind_with_an_example() -> None:
    result = _run("convert", "--help")
    assert result.exit_code == 0
    assert (
        "mrecord      any shard file of an mrecord dataset, rewritten in the current format"
    ) in result.output
    assert (
        "mrecord convert mrecord old.mrecord new.mrecord  # rewrite with the current format "
        "(1.4: a head index)"
    ) in result.output


def test_interrupted_conversion_resumes_to_the_same_bytes(tmp_path: Path) -> None:
    """Stopped after some checkpoints and run again with ``resume``: the clean run's bytes
    (the same dataset id given to both)."""
    src = _write_all_types(tmp_path / "old.mrecord", rows=60)
    for name in ("clean", "resumed"):
        (tmp_path / name).mkdir()
    options = WriteOptions(shard_num=2, page_size=4096, batch_rows=5, checkpoint_bytes=1)
    with MrecordSource(src) as source:
        write_source(source, tmp_path / "clean" / "d", options, dataset_id="cd" * 16)
    seen = []

    def stop_at_35(rows: int) -> None:
        seen.append(rows)
        if sum(seen) >= 35:
            raise KeyboardInterrupt

    with MrecordSource(src) as source, pytest.raises(KeyboardInterrupt):
        write_source(
            source, tmp_path / "resumed" / "d", options, progress=stop_at_35, dataset_id="cd" * 16
        )
    assert not list((tmp_path / "resumed").glob("d*[0-9]"))
    resume = WriteOptions(**{**options.__dict__, "resume": True})
    with MrecordSource(src) as source:
        summary = write_source(source, tmp_path / "resumed" / "d", resume)
    assert summary.resumed_at_row > 0
    clean = _files_bytes(tmp_path / "clean", "d*[0-9]*")
    assert clean and _files_bytes(tmp_path / "resumed", "d*[0-9]*") == clean
    _assert_rows_equal(_rows(tmp_path / "clean" / "d0"), [_row(i) for i in range(60)])
