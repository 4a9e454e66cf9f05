"""Arrow, Parquet and Hugging Face: type mapping, round trips of every field kind, errors."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import assume, given
from hypothesis import strategies as st

import mrecord
from mrecord import Block, DatasetReader, FileWriter
from mrecord.cli.main import cli
from mrecord.convert import convert_hf, convert_parquet
from mrecord.errors import ConversionError
from mrecord.format.schema import Field, parse_schema
from mrecord.testing.strategies import rows_for, schemas

# Hugging Face must never reach the network in tests: everything is built in memory.
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
datasets = pytest.importorskip("datasets")

# Every field kind: int/float/bool scalars, fixed arrays of several dtypes and ranks,
# variable-shape arrays (outer, inner and mixed variable dimensions), bytes, strings.
SCHEMA: dict[str, dict[str, Any]] = {
    "label": {"type": "int32"},
    "id": {"type": "int64"},
    "small": {"type": "int8"},
    "count": {"type": "uint16"},
    "score": {"type": "float64"},
    "half": {"type": "float16"},
    "flag": {"type": "bool"},
    "image": {"type": "uint8", "shape": [4, 3, 2]},
    "vec": {"type": "float32", "shape": [5]},
    "mask": {"type": "bool", "shape": [2, 2]},
    "ints": {"type": "int16", "shape": [3]},
    "boxes": {"type": "float32", "shape": [-1, 4]},
    "tokens": {"type": "int64", "shape": [-1]},
    "grid": {"type": "uint8", "shape": [-1, -1]},
    "cols": {"type": "float64", "shape": [2, -1]},
    "blob": {"type": "bytes"},
    "name": {"type": "string"},
}


def make_rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        k = int(rng.integers(1, 4))
        rows.append(
            {
                "label": int(rng.integers(-5, 5)),
                "id": int(rng.integers(-(2**62), 2**62)),
                "small": int(rng.integers(-128, 128)),
                "count": int(rng.integers(0, 65536)),
                "score": float(rng.normal()),
                "half": float(np.float16(rng.normal())),
                "flag": bool(i % 2),
                "image": rng.integers(0, 256, (4, 3, 2), dtype=np.uint8),
                "vec": rng.normal(size=5).astype(np.float32),
                "mask": rng.integers(0, 2, (2, 2)).astype(bool),
                "ints": rng.integers(-1000, 1000, 3).astype(np.int16),
                "boxes": rng.normal(size=(i % 3, 4)).astype(np.float32),
                "tokens": rng.integers(0, 10**6, i % 5).astype(np.int64),
                "grid": rng.integers(0, 256, (k, k + 1), dtype=np.uint8),
                "cols": rng.normal(size=(2, i % 4)),
                "blob": rng.bytes(i % 7),
                "name": f"row {i} é ✓" * (i % 3),
            }
        )
    return rows


def assert_same(got: Any, want: Any, where: str) -> None:
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        got_a, want_a = np.asarray(got), np.asarray(want)
        assert got_a.shape == want_a.shape, where
        assert got_a.dtype == want_a.dtype, where
        assert np.array_equal(got_a, want_a, equal_nan=want_a.dtype.kind == "f"), where
    else:
        assert got == want and type(got) is type(want), where


def assert_rows(path: Path, rows: list[dict[str, Any]], schema: dict[str, Any]) -> None:
    with DatasetReader.open(path) as reader:
        assert reader.num_rows == len(rows)
        assert parse_schema(schema).to_dict() == reader.schema.to_dict()
        block = reader.read_rows(np.arange(len(rows)))
    for i, row in enumerate(block.iter_rows()):
        for name, want in rows[i].items():
            if SCHEMA.get(name, {}).get("shape") is None and name in SCHEMA:
                kind = SCHEMA[name]["type"]
                if kind not in ("bytes", "string"):
                    want = np.asarray(want, dtype=kind)
            assert_same(
                row[name] if not isinstance(row[name], np.generic) else np.asarray(row[name]),
                want,
                f"row {i} field {name}",
            )


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    path = tmp_path_factory.mktemp("arrow") / "all.mrecord"
    rows = make_rows(23)
    with FileWriter(path) as writer:
        writer.add_schema(SCHEMA, desc="every kind")
        writer.write_raw_data(rows)
    return path, rows


def test_parquet_round_trip_every_field_kind(
    dataset: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    path, rows = dataset
    out = tmp_path / "all.parquet"
    result = CliRunner().invoke(cli, ["cat", str(path), "--format", "parquet", "-o", str(out)])
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.num_rows == len(rows)
    assert table.schema.field("image").type == pa.list_(pa.list_(pa.list_(pa.uint8(), 2), 3), 4)
    assert table.schema.field("boxes").type == pa.list_(pa.list_(pa.float32(), 4))
    assert table.column("name").to_pylist() == [r["name"] for r in rows]
    back = tmp_path / "back.mrecord"
    summary = convert_parquet(out, back, batch_rows=5)
    assert summary.rows == len(rows) and summary.kind == "parquet"
    assert_rows(back, rows, SCHEMA)


def test_arrow_stream_to_stdout_round_trip(
    dataset: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    path, rows = dataset
    result = CliRunner().invoke(cli, ["cat", str(path), "--format", "arrow"])
    assert result.exit_code == 0, result.stderr
    out = tmp_path / "all.arrow"
    out.write_bytes(result.stdout_bytes)
    back = tmp_path / "back.mrecord"
    result = CliRunner().invoke(cli, ["convert", "arrow", str(out), str(back), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows"] == len(rows)
    assert_rows(back, rows, SCHEMA)


def test_hugging_face_round_trip(
    dataset: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    path, rows = dataset
    hf = mrecord.to_hf(path)
    assert len(hf) == len(rows) and hf.column_names == list(SCHEMA)
    assert hf.info.description == "every kind"
    images = hf.with_format("numpy")["image"]
    assert np.array_equal(np.stack(list(images)), np.stack([r["image"] for r in rows]))
    back = tmp_path / "back.mrecord"
    summary = mrecord.from_hf(hf, back, shard_num=2)
    assert summary.rows == len(rows) and summary.shards == 2
    assert_rows(tmp_path / "back.mrecord0", rows, SCHEMA)
    # and through a save_to_disk folder with `mrecord convert hf`
    hf.save_to_disk(str(tmp_path / "saved"))
    again = tmp_path / "again.mrecord"
    convert_hf(tmp_path / "saved", again)
    assert_rows(again, rows, SCHEMA)


def test_hf_selection_order_and_class_labels_are_kept(tmp_path: Path) -> None:
    features = datasets.Features(
        {
            "y": datasets.ClassLabel(names=["cat", "dog"]),
            "x": datasets.Array2D((2, 3), "float32"),
            "seq": datasets.Array3D((None, 2, 2), "int32"),
        }
    )
    xs = np.arange(5 * 6, dtype=np.float32).reshape(5, 2, 3)
    seqs = [np.full((i + 1, 2, 2), i, dtype=np.int32) for i in range(5)]
    hf = datasets.Dataset.from_dict(
        {"y": [0, 1, 1, 0, 1], "x": list(xs), "seq": seqs}, features=features
    )
    picked = hf.select([4, 0, 2])
    dst = tmp_path / "h.mrecord"
    mrecord.from_hf(picked, dst)
    with DatasetReader.open(dst) as reader:
        assert reader.schema.to_dict() == {
            "y": {"type": "int64"},
            "x": {"type": "float32", "shape": [2, 3]},
            "seq": {"type": "int32", "shape": [-1, 2, 2]},
        }
        block = reader.read_rows(np.arange(3))
        assert reader.shards[0].meta.desc is not None
        desc = json.loads(reader.shards[0].meta.desc)
    assert desc["classes"] == {"y": ["cat", "dog"]}
    y = block.columns["y"]
    assert isinstance(y, np.ndarray)
    assert y.tolist() == [1, 0, 1]
    assert np.array_equal(block.columns["x"], xs[[4, 0, 2]])
    for got, i in zip(block.columns["seq"], [4, 0, 2], strict=True):
        assert np.array_equal(got, seqs[i])


def test_dataset_dict_needs_a_split(tmp_path: Path) -> None:
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"a": [1, 2]}),
            "test": datasets.Dataset.from_dict({"a": [3]}),
        }
    )
    dd.save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(ConversionError, match=r"splits \['test', 'train'\]"):
        convert_hf(tmp_path / "dd", tmp_path / "x.mrecord")
    assert not (tmp_path / "x.mrecord").exists()
    convert_hf(tmp_path / "dd", tmp_path / "t.mrecord", split="test")
    with DatasetReader.open(tmp_path / "t.mrecord") as reader:
        a = reader.read_rows(np.arange(1)).columns["a"]
        assert isinstance(a, np.ndarray)
        assert a.tolist() == [3]
    runner = CliRunner()
    result = runner.invoke(cli, ["convert", "hf", str(tmp_path / "dd"), str(tmp_path / "c")])
    assert result.exit_code == 3 and "choose one with split=... (--split)" in result.stderr
    result = runner.invoke(
        cli, ["convert", "hf", str(tmp_path / "dd"), str(tmp_path / "c"), "--split", "train"]
    )
    assert result.exit_code == 0, result.output
    assert "converted 2 rows of hf" in result.stdout
    result = runner.invoke(
        cli, ["convert", "parquet", "x.parquet", str(tmp_path / "p"), "--split", "train"]
    )
    assert result.exit_code == 2 and "--split applies to cifar10 and mnist and hf" in result.stderr


def test_arrow_types_map_to_fields(tmp_path: Path) -> None:
    tensor = pa.FixedShapeTensorArray.from_numpy_ndarray(
        np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    )
    table = pa.table(
        {
            "u32": pa.array([1, 2**32 - 1], pa.uint32()),
            "ls": pa.array(["a", "bé"], pa.large_string()),
            "lb": pa.array([b"x", b""], pa.large_binary()),
            "fb": pa.array([b"ab", b"cd"], pa.binary(2)),
            "cat": pa.array(["x", "y"]).dictionary_encode(),
            "t": tensor,
            "ll": pa.array([[1.5], [2.5, 3.5]], pa.large_list(pa.float64())),
            "nested": pa.array([[[1, 2], [3, 4]], [[5, 6]]], pa.list_(pa.list_(pa.int8(), 2))),
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    convert_parquet(tmp_path / "t.parquet", tmp_path / "t.mrecord")
    with DatasetReader.open(tmp_path / "t.mrecord") as reader:
        assert reader.schema.to_dict() == {
            "u32": {"type": "int64"},
            "ls": {"type": "string"},
            "lb": {"type": "bytes"},
            "fb": {"type": "bytes"},
            "cat": {"type": "string"},
            "t": {"type": "float32", "shape": [3, 4]},
            "ll": {"type": "float64", "shape": [-1]},
            "nested": {"type": "int8", "shape": [-1, 2]},
        }
        row = reader.read_row(1)
    assert row["u32"] == 2**32 - 1 and row["ls"] == "bé" and row["fb"] == b"cd"
    assert row["cat"] == "y"
    assert np.array_equal(row["t"], np.arange(12, 24, dtype=np.float32).reshape(3, 4))
    assert np.array_equal(row["nested"], np.array([[5, 6]], dtype=np.int8))


@pytest.mark.parametrize(
    ("array", "needle"),
    [
        (pa.array([1, 2], pa.timestamp("ms")), "timestamp[ms]"),
        (pa.array([1, 2], pa.uint64()), "uint64"),
        (pa.array([{"a": 1}, {"a": 2}]), "struct"),
        (pa.array([["a"], ["b"]]), ": string>"),
        (pa.array([1, 2], pa.decimal128(5, 2)), "decimal"),
        (pa.array([None, None]), "null"),
    ],
)
def test_types_mrecord_cannot_store_name_the_column(
    tmp_path: Path, array: Any, needle: str
) -> None:
    pq.write_table(pa.table({"ok": [1, 2], "bad_col": array}), tmp_path / "b.parquet")
    with pytest.raises(ConversionError, match="bad_col") as info:
        convert_parquet(tmp_path / "b.parquet", tmp_path / "b.mrecord")
    assert needle in str(info.value) and "cannot store" in str(info.value)
    assert not list(tmp_path.glob("b.mrecord*"))


def test_a_string_arrow_cannot_encode_names_the_column() -> None:
    """A lone surrogate has no UTF-8 form: a typed error naming the column, not
    Python's ``UnicodeEncodeError`` from inside the export."""
    with pytest.raises(ConversionError, match=r"column 'caption'.*not valid Unicode"):
        Block({"caption": ["fine", "half \ud800 pair"]}).to_arrow([Field("caption", "string")])


def test_nulls_and_ragged_rows_name_the_column_and_row(tmp_path: Path) -> None:
    with pytest.raises(ConversionError, match=r"column 'x': row 2 is null"):
        Block.from_arrow(pa.table({"x": pa.array([1.0, 2.0, None])}))
    ragged = pa.array([[[1], [2]], [[1, 2], [3]]], pa.list_(pa.list_(pa.int32())))
    with pytest.raises(ConversionError, match=r"column 'g': row 1 is ragged"):
        Block.from_arrow(pa.table({"g": ragged}))
    with pytest.raises(ConversionError, match="'bad name'"):
        Block.from_arrow(pa.table({"bad name": [1]}))


def test_block_to_arrow_infers_types_without_a_schema() -> None:
    block = Block(
        {
            "a": np.arange(3, dtype=np.int16),
            "img": np.zeros((3, 2, 2), np.uint8),
            "var": [np.ones((i, 2), np.float32) for i in range(3)],
            "s": ["x", "y", "z"],
            "b": [b"1", b"22", b""],
        }
    )
    table = block.to_arrow()
    assert table.schema.field("a").type == pa.int16()
    assert table.schema.field("img").type == pa.list_(pa.list_(pa.uint8(), 2), 2)
    assert table.schema.field("var").type == pa.list_(pa.list_(pa.float32(), 2))
    back = Block.from_arrow(table)
    assert back.columns["var"][0].shape == (0, 2)
    assert back.columns["b"] == [b"1", b"22", b""]


def _expected_after_arrow(value: Any, shape: list[int] | None) -> Any:
    """Arrow cannot record the inner variable dimensions of an empty list: they read as 0."""
    if not isinstance(value, np.ndarray) or shape is None or -1 not in shape:
        return value
    dims = list(value.shape)
    for k in range(1, len(dims)):
        if 0 in dims[:k] and shape[k] == -1:
            dims[k] = 0
    return value.reshape(dims)


@given(st.data())
def test_block_arrow_round_trip_property(data: st.DataObject) -> None:
    schema = data.draw(schemas(max_fields=4))
    assume(all(0 not in spec.get("shape", []) for spec in schema.values()))
    rows = data.draw(rows_for(schema, 1, 6))
    fields = parse_schema(schema)
    block = Block(
        {
            f.name: (
                np.array([r[f.name] for r in rows], dtype=f.dtype)
                if f.kind.value == "fixed"
                else [r[f.name] for r in rows]
            )
            for f in fields.fields
        }
    )
    back = Block.from_arrow(block.to_arrow(fields))
    assert back.column_names == block.column_names
    for f in fields.fields:
        for i, row in enumerate(rows):
            want = row[f.name]
            if f.kind.value == "fixed":
                want = np.asarray(want, dtype=f.dtype)
            want = _expected_after_arrow(want, list(f.shape) if f.shape else None)
            got = back.columns[f.name][i]
            if isinstance(got, np.generic):
                got = np.asarray(got)
            assert_same(got, want, f"row {i} field {f.name}")


def test_hf_images_are_stored_as_their_encoded_bytes(tmp_path: Path) -> None:
    image_mod = pytest.importorskip("PIL.Image")
    pixels = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    hf = datasets.Dataset.from_dict(
        {"image": [image_mod.fromarray(pixels)] * 2, "label": [3, 4]},
        features=datasets.Features({"image": datasets.Image(), "label": datasets.Value("int32")}),
    )
    dst = tmp_path / "img.mrecord"
    mrecord.from_hf(hf, dst)
    with DatasetReader.open(dst) as reader:
        assert reader.schema.to_dict()["image"] == {"type": "bytes"}
        assert list(reader.shards[0].meta.index_fields) == ["label"]  # label indexed by default
        row = reader.read_row(1)
    assert row["image"].startswith(b"\x89PNG")
    assert np.array_equal(np.asarray(image_mod.open(io.BytesIO(row["image"]))), pixels)


def test_an_image_given_only_by_path_is_refused(tmp_path: Path) -> None:
    storage = pa.StructArray.from_arrays(
        [pa.array([b"\x89PNG", None], pa.binary()), pa.array([None, "/data/cat.png"])],
        names=["bytes", "path"],
    )
    with pytest.raises(
        ConversionError,
        match=r"row 1 has no embedded bytes, only the path "
        r"'/data/cat.png'",
    ):
        Block.from_arrow(pa.table({"image": storage}))
