"""What the ``mrecord`` commands accept as a dataset: any shard, the shards' base name
(a mistyped name gets "did you mean ...0?"), a folder of one dataset's shards, or a URL; and
read-only use where ``fcntl`` does not exist."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from harness.servers import http_server
from mrecord import DatasetReader
from mrecord.cli.main import cli
from mrecord.errors import DatasetNotFoundError
from tests.factory import MakeDataset

COMMANDS_THAT_READ = [
    ["info", "--json"],
    ["head", "-n", "2"],
    ["verify"],
    ["stats", "-q", "--json"],
    ["cat"],
    ["bench", "--json", "--max-rows", "8"],
]


def run(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def write(make: MakeDataset, folder: Path, name: str = "data.mrecord", shards: int = 4) -> Path:
    """20 rows of ``make_dataset`` in ``shards`` files named ``name``; returns the first."""
    return make(20, shards=shards, folder=folder, name=name)


@pytest.mark.parametrize("command", [*COMMANDS_THAT_READ, ["reindex"]], ids=lambda c: c[0])
def test_base_name_of_a_sharded_dataset_is_that_dataset(
    make_dataset: MakeDataset, tmp_path: Path, command: list[str]
) -> None:
    write(make_dataset, tmp_path)
    result = run(*command, tmp_path / "data.mrecord")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("command", [*COMMANDS_THAT_READ, ["reindex"]], ids=lambda c: c[0])
def test_a_mistyped_shard_name_hints_shard_0(
    make_dataset: MakeDataset, tmp_path: Path, command: list[str]
) -> None:
    write(make_dataset, tmp_path, shards=12)  # data.mrecord00 .. data.mrecord11
    result = run(*command, tmp_path / "data.mrecord0")
    assert result.exit_code == 3, result.output
    assert "did you mean" in result.stderr and "data.mrecord00" in result.stderr
    assert "12 shards" in result.stderr
    assert "Traceback" not in result.output


def test_library_open_gives_the_same_hint(make_dataset: MakeDataset, tmp_path: Path) -> None:
    write(make_dataset, tmp_path, shards=12)
    with pytest.raises(DatasetNotFoundError, match=r"did you mean '.*data\.mrecord00'"):
        DatasetReader.open(tmp_path / "data.mrecord0")


def test_a_name_with_no_shards_has_no_hint(tmp_path: Path) -> None:
    result = run("info", tmp_path / "nothing.mrecord")
    assert result.exit_code == 3 and "does not exist" in result.stderr
    assert "did you mean" not in result.stderr


@pytest.mark.parametrize("command", [*COMMANDS_THAT_READ, ["reindex"]], ids=lambda c: c[0])
def test_a_folder_of_one_dataset_is_that_dataset(
    make_dataset: MakeDataset, tmp_path: Path, command: list[str]
) -> None:
    write(make_dataset, tmp_path / "ds")
    result = run(*command, tmp_path / "ds")
    assert result.exit_code == 0, result.output


def test_folder_info_reports_every_shard(make_dataset: MakeDataset, tmp_path: Path) -> None:
    write(make_dataset, tmp_path / "ds")
    info = json.loads(run("info", "--json", tmp_path / "ds").stdout)
    assert info["rows"] == 20 and info["shards"] == 4


def test_a_folder_of_two_datasets_names_both(make_dataset: MakeDataset, tmp_path: Path) -> None:
    write(make_dataset, tmp_path, "a.mrecord", shards=2)
    write(make_dataset, tmp_path, "b.mrecord", shards=1)
    (tmp_path / "notes.txt").write_text("not a shard")
    result = run("info", tmp_path)
    assert result.exit_code == 2, result.output
    assert "2 datasets" in result.stderr
    assert "a.mrecord0" in result.stderr and "b.mrecord" in result.stderr


def test_a_folder_without_datasets_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a shard")
    result = run("head", tmp_path)
    assert result.exit_code == 3 and "no mrecord data file" in result.stderr


def test_commands_read_a_url(
    make_dataset: MakeDataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("fsspec")
    monkeypatch.setenv("MRECORD_CACHE_DIR", str(tmp_path / "cache"))
    first = write(make_dataset, tmp_path / "srv")
    with http_server(first.parent) as server:
        url = f"{server.url}/{first.name}"
        for command in COMMANDS_THAT_READ:
            result = run(*command, url)
            assert result.exit_code == 0, (command, result.output)
        assert json.loads(run("info", "--json", url).stdout)["rows"] == 20
        result = run("reindex", url)
        assert result.exit_code == 2 and "local files only" in result.stderr


def test_read_only_use_works_without_fcntl(make_dataset: MakeDataset, tmp_path: Path) -> None:
    """Where fcntl does not exist, import and reads work; a writer says why it cannot lock."""
    first = write(make_dataset, tmp_path)
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["fcntl"] = None  # as on Windows
        import mrecord
        from mrecord import DatasetReader, FileWriter
        from mrecord.errors import UnsupportedPlatformError
        with DatasetReader.open({str(first)!r}) as reader:
            print(reader.num_rows)
        try:
            FileWriter({str(tmp_path / "new.mrecord")!r})  # takes the dataset lock at once
        except UnsupportedPlatformError as exc:
            print(isinstance(exc, NotImplementedError), exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ)
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "20"
    assert lines[1].startswith("True") and "fcntl" in lines[1] and "Linux or macOS" in lines[1]
