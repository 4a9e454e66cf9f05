"""The ``mrecord`` command through click's CliRunner: output, JSON, exit codes, errors."""

from __future__ import annotations

import base64
import json
import re
import sqlite3
import subprocess
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from mrecord.cli.main import cli
from tests.convert.test_convert_sources import (
    cifar_dir,
    image_folder,
    write_cifar,
    write_csv,
    write_idx,
)
from tests.format.test_mindrecord_import import FIXTURES, SAMPLES, expected

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def assert_one_line_error(result: Result, code: int, *needles: str) -> None:
    assert result.exit_code == code, result.output
    err = result.stderr.strip()
    assert "Traceback" not in result.output
    assert len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err


@pytest.fixture
def cifar(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    expect = cifar_dir(tmp_path, np.random.default_rng(11), per_file=4)
    return tmp_path / "cifar-10-batches-bin", expect


def test_convert_cifar10_json_summary(tmp_path: Path, cifar: tuple[Path, dict[str, Any]]) -> None:
    src, expect = cifar
    dst = tmp_path / "c.mrecord"
    result = run("convert", "cifar10", src, dst, "--shards", "2", "--json", "--page-size", "64K")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["rows"] == 20 and summary["shards"] == 2
    assert [Path(f).name for f in summary["files"]] == ["c.mrecord0", "c.mrecord1"]
    assert summary["bytes"] > 20 * 3072
    # stats: the label histogram counts every label of the training files
    result = run("stats", tmp_path / "c.mrecord0", "--json", "-q")
    assert result.exit_code == 0, result.output
    fields = json.loads(result.stdout)["fields"]
    want = Counter(expect["train"][1])
    assert fields["label"]["histogram"] == {str(k): v for k, v in sorted(want.items())}
    assert fields["image"]["min"] >= 0 and fields["image"]["max"] <= 255
    assert fields["image"]["count"] == 20


def test_human_summary_and_head(tmp_path: Path, cifar: tuple[Path, dict[str, Any]]) -> None:
    src, expect = cifar
    dst = tmp_path / "t.mrecord"
    result = run("convert", "cifar10", src, dst, "--split", "test")
    assert result.exit_code == 0
    assert "converted 4 rows of cifar10" in result.stdout and "1 shard(s)" in result.stdout
    result = run("head", dst, "-n", "2")
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    label = int(expect["test"][1][0])
    assert json.loads(lines[0])["label"] == f"{label} (c{label})"  # with its class name
    assert "uint8[32, 32, 3]" in json.loads(lines[0])["image"]


def test_cat_jsonl_round_trips_mindrecord_import(tmp_path: Path) -> None:
    exp = expected("alltypes")
    dst = tmp_path / "a.mrecord"
    assert run("convert", "mindrecord", FIXTURES / SAMPLES["alltypes"], dst, "-q").exit_code == 0
    result = run("cat", dst, "--format", "jsonl")
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == len(exp["rows"])
    for got, want in zip(rows, exp["rows"], strict=True):
        assert base64.b64decode(got["b"]["base64"]) == bytes.fromhex(want["b"]["bytes_hex"])
        assert got["s"] == want["s"] and got["i64"] == want["i64"]
        assert np.asarray(got["a_i64"]).reshape(-1).tolist() == want["a_i64"]["data"]
        assert np.float32(got["f32"]) == np.float32(want["f32"])
    result = run("cat", dst, "--columns", "i32", "--start", "28", "-n", "5")
    assert [json.loads(x) for x in result.stdout.splitlines()] == [
        {"i32": exp["rows"][28]["i32"]},
        {"i32": exp["rows"][29]["i32"]},
    ]


def test_info_verify_damage_and_reindex(tmp_path: Path, cifar: tuple[Path, dict[str, Any]]) -> None:
    src, _ = cifar
    dst = tmp_path / "v.mrecord"
    assert run("convert", "cifar10", src, dst, "-q").exit_code == 0
    info = json.loads(run("info", dst, "--json").stdout)
    assert info["rows"] == 20
    ok = run("verify", dst)
    assert ok.exit_code == 0 and ok.stdout.startswith("OK")
    assert json.loads(run("verify", dst, "--json").stdout)["ok"] is True
    # the index can be rebuilt from the data file
    Path(str(dst) + ".db").unlink()
    assert run("reindex", dst).exit_code == 0
    assert run("verify", dst).exit_code == 0
    # damage a byte inside the pixel data: verify reports it with exit code 1
    data = bytearray(dst.read_bytes())
    data[len(data) // 2] ^= 0xFF
    dst.write_bytes(bytes(data))
    bad = run("verify", dst)
    assert bad.exit_code == 1, bad.output
    assert "DAMAGED" in bad.stderr


def test_bench_json(tmp_path: Path, cifar: tuple[Path, dict[str, Any]]) -> None:
    src, _ = cifar
    dst = tmp_path / "b.mrecord"
    assert run("convert", "cifar10", src, dst, "-q").exit_code == 0
    result = run("bench", dst, "--json", "--batch-size", "7")
    out = json.loads(result.stdout)
    assert [r["pattern"] for r in out["results"]] == ["sequential", "shuffled"]
    assert all(r["rows"] == 20 and r["bytes"] == 20 * (3072 + 4) for r in out["results"])


def test_wrong_magic_number_is_bad_input(tmp_path: Path) -> None:
    write_idx(tmp_path / "train-images-idx3-ubyte", 2049, np.zeros((2, 28, 28)), gz=False)
    write_idx(tmp_path / "train-labels-idx1-ubyte", 2049, np.zeros(2), gz=False)
    result = run("convert", "mnist", tmp_path, tmp_path / "m.mrecord")
    assert_one_line_error(result, 3, "train-images-idx3-ubyte", "magic number 2049")
    assert not (tmp_path / "m.mrecord").exists()


def test_truncated_file_is_bad_input(tmp_path: Path) -> None:
    f = tmp_path / "test_batch.bin"
    write_cifar(f, np.zeros((2, 32, 32, 3), np.uint8), [1, 2])
    f.write_bytes(f.read_bytes()[:5000])
    result = run("convert", "cifar10", f, tmp_path / "o.mrecord")
    assert_one_line_error(result, 3, "test_batch.bin", "truncated")
    assert not (tmp_path / "o.mrecord").exists()


def test_missing_folder_is_bad_input(tmp_path: Path) -> None:
    result = run("convert", "imagefolder", tmp_path / "gone", tmp_path / "o.mrecord")
    assert_one_line_error(result, 3, "gone", "does not exist")


def test_truncated_mindrecord_is_bad_input(tmp_path: Path) -> None:
    f = tmp_path / "images.mindrecord"
    f.write_bytes((FIXTURES / "images.mindrecord").read_bytes()[:20000])
    result = run("convert", "mindrecord", f, tmp_path / "o.mrecord")
    assert_one_line_error(result, 3, "images.mindrecord", "truncated")


def test_bad_csv_value_names_line_and_column(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    write_csv(f, [["a", "b"], [1, 2], [3, "x"]])
    result = run(
        "convert", "csv", f, tmp_path / "o.mrecord", "--schema", '{"a":"int64","b":"int64"}'
    )
    assert_one_line_error(result, 3, "line 3", "column 'b'", "'x'")


def test_usage_errors_exit_2(tmp_path: Path, cifar: tuple[Path, dict[str, Any]]) -> None:
    src, _ = cifar
    dst = tmp_path / "u.mrecord"
    assert run("convert", "cifar10", src, dst, "-q").exit_code == 0
    again = run("convert", "cifar10", src, dst)
    assert_one_line_error(again, 2, "already exists", "--overwrite")
    assert run("convert", "cifar10", src, dst, "--overwrite", "-q").exit_code == 0
    assert_one_line_error(run("convert", "mnist", src, dst, "--png"), 2, "--png applies to cifar10")
    assert run("convert", "tfrecord", src, dst).exit_code == 2
    assert run("convert", "cifar10", src, dst, "--page-size", "lots").exit_code == 2
    result = run("convert", "cifar10", src, tmp_path / "x.mrecord", "--index", "image")
    assert_one_line_error(result, 2, "index field 'image'")


def test_imagefolder_skip_bad_images_notes_them(tmp_path: Path) -> None:
    root, expect = image_folder(tmp_path)
    (root / "dog" / "bad.jpg").write_bytes(b"nope")
    dst = tmp_path / "f.mrecord"
    failed = run("convert", "imagefolder", root, dst)
    assert_one_line_error(failed, 3, "dog/bad.jpg", "--skip-bad-images")
    result = run("convert", "imagefolder", root, dst, "--skip-bad-images")
    assert result.exit_code == 0
    assert f"converted {len(expect)} rows" in result.stdout
    assert "dog/bad.jpg" in result.stderr


def test_help_has_examples_and_exit_codes() -> None:
    top = run("--help").stdout
    assert "Examples:" in top and "Exit codes:" in top and "bad input file" in top
    conv = run("convert", "--help").stdout
    for option in (
        "--shards",
        "--page-size",
        "--compression",
        "--compress-field",
        "--index",
        "--split",
        "--png",
        "--overwrite",
        "--json",
    ):
        assert option in conv


def test_tools_script_runs_the_converter(tmp_path: Path) -> None:
    dst = tmp_path / "s.mrecord"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "convert_csv.py"),
            str(tmp_path / "none.csv"),
            str(dst),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3 and "none.csv" in proc.stderr
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "convert_mindrecord.py"),
            str(FIXTURES / "sharded.mindrecord0"),
            str(dst),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rows"] == 103


def test_info_for_people_shows_the_schema_and_shards_as_tables(
    tmp_path: Path, cifar: tuple[Path, dict[str, Any]]
) -> None:
    src, _ = cifar
    dst = str(tmp_path / "c.mrecord")
    run("convert", "cifar10", str(src), dst, "--shards", "2", "--quiet")
    text = run("info", dst + "0").stdout
    assert "rows      20 in 2 shard(s)" in text
    assert re.search(r"^image\s+uint8\s+\[32,32,3\]\s+none", text, flags=re.M)
    assert re.search(r"^label\s+int32\s+-", text, flags=re.M)
    assert text.count(".mrecord") >= 2


def test_index_and_compress_field_take_comma_separated_lists(tmp_path: Path) -> None:
    """``--index file_name,label`` (as ``--columns a,b`` elsewhere) indexes both fields;
    it was refused as one field named ``'file_name,label'``."""
    src = tmp_path / "names.csv"
    src.write_text("id,file_name,label\n1,a.jpg,3\n2,b.jpg,4\n")
    dst = tmp_path / "names.mrecord"
    schema = '{"id": "int64", "file_name": "string", "label": "int32"}'
    result = run(
        "convert", "csv", src, dst, "--schema", schema, "-q",
        "--index", "file_name, label", "--compression", "zstd", "--compress-field", "file_name,id",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    with closing(sqlite3.connect(f"{dst}.db")) as conn:
        rows = conn.execute("SELECT f_file_name, f_label FROM rows ORDER BY row_id").fetchall()
    assert rows == [("a.jpg", 3), ("b.jpg", 4)]
    info = json.loads(run("info", dst, "--json").stdout)
    compressed = {f["name"] for f in info["schema"] if f["compression"] == "zstd"}
    assert compressed == {"file_name", "id"}
    repeated = run("convert", "csv", src, tmp_path / "r.mrecord", "--schema", schema,
                   "--index", "file_name", "--index", "label", "-q")  # fmt: skip
    assert repeated.exit_code == 0, repeated.stderr
