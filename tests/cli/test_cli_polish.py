"""CLI polish: verify's exit codes for missing and foreign files, progress bars, one size
formatter (binary units) and table layout, and error messages without object reprs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from mrecord import DatasetReader, FileWriter
from mrecord.cli._format import format_rate, format_size, format_table
from mrecord.cli.main import cli
from mrecord.errors import CorruptFileError, NotAnMrecordFileError
from mrecord.format.layout import HEADER_MAGIC, describe_foreign, encode_header

PNG_HEAD = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200)


def run(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def make_dataset(path: Path, shards: int = 1, rows: int = 40) -> Path:
    with FileWriter(path, shard_num=shards) as writer:
        writer.add_schema({"label": {"type": "int32"}, "x": {"type": "float32", "shape": [8]}})
        writer.set_page_size(1024)
        writer.add_index(["label"])
        writer.write_raw_data(
            {
                "label": np.arange(rows, dtype=np.int32),
                "x": np.zeros((rows, 8), np.float32),
            }
        )
    return path if shards == 1 else path.with_name(path.name + "0")


def test_verify_missing_file_exits_3_not_damaged(tmp_path: Path) -> None:
    result = run("verify", tmp_path / "nope.mrecord")
    assert result.exit_code == 3, result.output
    assert "does not exist" in result.stderr and "DAMAGED" not in result.output


@pytest.mark.parametrize(
    ("head", "what"),
    [
        (PNG_HEAD, "a PNG image"),
        (b"PAR1" + bytes(100), "a Parquet file"),
        (b"SQLite format 3\x00" + bytes(100), "a SQLite database"),
        (b"hello, world\n" * 10, "starts with b'hello, w'"),
    ],
)
def test_verify_and_info_on_a_foreign_file_say_what_it_is(
    tmp_path: Path, head: bytes, what: str
) -> None:
    path = tmp_path / "picture.mrecord"
    path.write_bytes(head)
    for command in ("verify", "info", "head"):
        result = run(command, path)
        assert result.exit_code == 3, (command, result.output)
        err = result.stderr.strip()
        assert "is not an mrecord file (starts with" in err and what in err, err
        assert "truncated" not in err and "DAMAGED" not in result.output
        assert len(err.splitlines()) == 1
    with pytest.raises(NotAnMrecordFileError) as info:
        DatasetReader.open(path)
    assert isinstance(info.value, CorruptFileError) and isinstance(info.value, ValueError)


def test_a_short_file_with_mrecord_magic_is_still_truncated(tmp_path: Path) -> None:
    path = tmp_path / "cut.mrecord"
    path.write_bytes(encode_header()[:20])
    with pytest.raises(CorruptFileError, match="truncated, or not committed"):
        DatasetReader.open(path)
    assert describe_foreign(HEADER_MAGIC[:3]) is None
    assert describe_foreign(b"") is None


def test_a_shard_with_a_damaged_header_is_damage_not_a_foreign_file(tmp_path: Path) -> None:
    """The trailer magic still says mrecord: verify reports damage (exit 1), not exit 3."""
    path = make_dataset(tmp_path / "h.mrecord")
    data = bytearray(path.read_bytes())
    data[0:8] = b"\x89PNG\r\n\x1a\n"
    path.write_bytes(bytes(data))
    assert describe_foreign(bytes(data[:64]), bytes(data[-8:])) is None
    result = run("verify", path)
    assert result.exit_code == 1, result.output
    assert "DAMAGED" in result.stderr and "header magic" in result.stderr


def test_verify_a_lost_sibling_shard_is_damage_exit_1(tmp_path: Path) -> None:
    first = make_dataset(tmp_path / "d.mrecord", shards=2)
    (tmp_path / "d.mrecord1").unlink()
    result = run("verify", first)
    assert result.exit_code == 1, result.output
    assert "DAMAGED" in result.stderr and "d.mrecord1" in result.stderr


def test_verify_and_reindex_progress_bars_with_progress_flag(tmp_path: Path) -> None:
    path = make_dataset(tmp_path / "p.mrecord", rows=300)
    quiet = run("verify", path)
    assert quiet.exit_code == 0 and quiet.stderr == ""  # not a TTY: no bar by default
    shown = run("verify", path, "--progress")
    assert shown.exit_code == 0 and "OK: 300 rows" in shown.stdout
    pages = int(re.search(r"(\d+) pages checked", shown.stdout).group(1))  # type: ignore[union-attr]
    assert pages > 1
    assert re.search(rf"verify: 100%.*{pages}/{pages}", shown.stderr), shown.stderr
    assert run("verify", path, "--progress", "-q").stderr == ""
    rebuilt = run("reindex", path, "--progress")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert re.search(r"reindex: 100%.*300/300 \[.*rows/s", rebuilt.stderr), rebuilt.stderr
    assert run("reindex", path).stderr == ""
    assert run("verify", path).exit_code == 0  # the rebuilt index is intact


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (None, "-"),
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1024 * 1024 - 1, "1,024.0 KiB"),
        (1 << 20, "1.0 MiB"),
        (int(30.4 * (1 << 20)), "30.4 MiB"),
        (5 << 30, "5.0 GiB"),
        (3 << 40, "3.0 TiB"),
    ],
)
def test_format_size_uses_binary_units(n: int | None, text: str) -> None:
    assert format_size(n) == text


def test_format_rate_and_table() -> None:
    assert format_rate(3 * (1 << 20)) == "3.0 MiB/s"
    lines = format_table(["name", "rows"], [["a", "5"], ["long_name", "1,000"]], right=["rows"])
    assert lines == [
        "name        rows",
        "----------------",
        "a              5",
        "long_name  1,000",
    ]
    with pytest.raises(ValueError, match="2 columns"):
        format_table(["a", "b"], [["x"]])


def test_every_command_shows_sizes_in_binary_units(tmp_path: Path) -> None:
    path = make_dataset(tmp_path / "s.mrecord")
    info = run("info", path).stdout
    assert "page size 1.0 KiB" in info
    bench = run("bench", path, "--max-rows", "10").stdout
    assert "MiB/s" in bench
    npz = tmp_path / "a.npz"
    np.savez(npz, x=np.zeros((10, 4), np.float32))
    converted = run("convert", "npz", npz, tmp_path / "c.mrecord").stdout
    assert re.search(r"\d KiB", converted)
    for text in (info, bench, converted):
        assert not re.search(r"\d (KB|MB|GB)\b|MB/s", text), text


def test_info_tables_line_up(tmp_path: Path) -> None:
    path = make_dataset(tmp_path / "t.mrecord")
    lines = run("info", path).stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("field"))
    assert set(lines[header + 1]) == {"-"}
    assert re.match(r"^label\s+int32\s+-\s+none\s+\S+ \S+\s+\S+ \S+$", lines[header + 2])
    assert re.match(r"^x\s+float32\s+\[8\]\s+none", lines[header + 3])


def test_unreadable_image_message_has_no_object_repr(tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    (tmp_path / "src" / "cat").mkdir(parents=True)
    (tmp_path / "src" / "cat" / "a.jpg").write_bytes(b"not an image at all")
    result = run("convert", "imagefolder", tmp_path / "src", tmp_path / "i.mrecord")
    assert result.exit_code == 3
    assert "object at 0x" not in result.stderr and "_io." not in result.stderr
    assert "'cat/a.jpg': not a readable image: 19 bytes starting with b'not an i'" in (
        result.stderr
    )
