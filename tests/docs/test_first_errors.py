"""Errors a new user met that said the wrong thing (issue 26, item 10).

- an unreadable ``.db`` or shard (permissions) is a permission problem with exit 3, not
  "corrupt, reindex it" or a raw ``[Errno 13]`` with exit 4;
- ``mrecord serve missing.mrecord0`` fails before printing "serving ... on http://";
- ``info`` names the ``*.mrecord-partial`` files a killed write left;
- ``info`` fails (exit 3) when a shard's ``.db`` is missing, as ``MindDataset`` does.

Root reads any file whatever its mode, so when the tests run as root the command runs
under ``setpriv`` without the capabilities that bypass file permissions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mrecord.cli.main import cli
from tests.factory import MakeDataset

ROOT = Path(__file__).resolve().parents[2]
_NO_BYPASS = "-dac_override,-dac_read_search"


def run(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def write(make: MakeDataset, folder: Path, name: str = "d.mrecord", shards: int = 2) -> Path:
    """10 rows of ``make_dataset`` in ``shards`` files named ``name``; returns the first."""
    return make(10, shards=shards, folder=folder, name=name)


def as_a_user(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` so that file permissions apply (see the module docstring)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: file permissions cannot apply")
        prefix = [setpriv, f"--bounding-set={_NO_BYPASS}", f"--inh-caps={_NO_BYPASS}"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(prefix + argv, capture_output=True, text=True, env=env, timeout=120)


@contextmanager
def unreadable(path: Path) -> Iterator[Path]:
    mode = path.stat().st_mode
    path.chmod(0)
    try:
        yield path
    finally:
        path.chmod(mode)


OPEN = "from mrecord import MindDataset; MindDataset({path!r})"


def test_unreadable_index_is_a_permission_error(make_dataset: MakeDataset, tmp_path: Path) -> None:
    first = write(make_dataset, tmp_path)
    with unreadable(tmp_path / "d.mrecord0.db"):
        lib = as_a_user([sys.executable, "-c", OPEN.format(path=str(first))])
        cmd = as_a_user([sys.executable, "-m", "mrecord.cli", "info", str(first)])
    assert "UnreadableFileError" in lib.stderr and "reindex" not in lib.stderr
    assert "d.mrecord0.db" in lib.stderr and "permission" in lib.stderr.lower()
    assert cmd.returncode == 3, cmd.stderr
    assert "d.mrecord0.db" in cmd.stderr and "reindex" not in cmd.stderr


def test_unreadable_shard_is_a_permission_error_with_exit_3(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    first = write(make_dataset, tmp_path)
    with unreadable(tmp_path / "d.mrecord1"):
        lib = as_a_user([sys.executable, "-c", OPEN.format(path=str(first))])
        cmd = as_a_user([sys.executable, "-m", "mrecord.cli", "info", str(first)])
    assert "UnreadableFileError" in lib.stderr and "d.mrecord1" in lib.stderr
    assert cmd.returncode == 3, cmd.stderr
    assert "Errno" not in cmd.stderr
    assert "cannot read data file" in cmd.stderr and "check the permissions" in cmd.stderr


def test_serve_a_missing_dataset_fails_before_saying_serving(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    result = run("serve", tmp_path / "missing.mrecord0", "--port", "0")
    assert result.exit_code == 3
    assert "does not exist" in result.stderr
    assert "serving" not in result.output


def test_info_names_partial_files_a_killed_write_left(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    write(make_dataset, tmp_path)
    left = tmp_path / "d.mrecord0.mrecord-partial"
    left.write_bytes(b"half a shard")
    result = run("info", tmp_path / "d.mrecord0")
    assert result.exit_code == 0
    assert "d.mrecord0.mrecord-partial" in result.output and "interrupted" in result.output
    data = json.loads(run("info", "--json", tmp_path / "d.mrecord0").stdout)
    assert data["leftovers"] == [str(left)]
    # nothing committed at all: the missing name says what the partial files are
    (tmp_path / "new.mrecord0.mrecord-partial").write_bytes(b"half a shard")
    result = run("info", tmp_path / "new.mrecord")
    assert result.exit_code == 3
    assert "new.mrecord0.mrecord-partial" in result.stderr and "interrupted" in result.stderr


def test_info_fails_when_an_index_is_missing(make_dataset: MakeDataset, tmp_path: Path) -> None:
    first = write(make_dataset, tmp_path)
    (tmp_path / "d.mrecord1.db").unlink()
    result = run("info", first)
    assert result.exit_code == 3
    assert "d.mrecord1.db" in result.stderr and "mrecord reindex" in result.stderr
    assert "rows" in result.output  # the summary is still shown


def test_help_and_cli_md_list_the_same_exit_codes() -> None:
    """``mrecord --help`` said 4 for write errors while CLI.md and the code use 5."""
    import re

    from mrecord.cli._errors import EXIT_BAD_INPUT, EXIT_STORAGE

    text = run("--help").output
    helped = {int(m.group(1)): m.group(2) for m in re.finditer(r"^ +(\d+) +(.+)$", text, re.M)}
    table = (ROOT / "docs" / "CLI.md").read_text()
    documented = {int(m.group(1)) for m in re.finditer(r"^\| (\d+) \|", table, re.M)}
    assert set(helped) == documented
    assert "a write" in helped[EXIT_STORAGE] and "while writing" not in helped[4]
    assert "unreadable" in helped[EXIT_BAD_INPUT]
