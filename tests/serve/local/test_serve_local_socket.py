"""The same-host transport's socket file: private, removed on stop, chosen by the command.

The socket and its folder are private to the user; a server that cannot bind or that stops
leaves nothing behind; ``mrecord serve --local-socket`` refuses paths it cannot use and
serves the one it was given.
"""


from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import stat
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

import mrecord
from mrecord import MindDataset, Shuffle
from mrecord.errors import (
    ArgumentError,
)
from mrecord.serve.protocol import local as local_protocol
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.server.local import LocalServer, default_socket_path
from mrecord.serve.server.registry import ServedDataset
from mrecord.serve.server.run import ServerThread, local_socket_path
from tests.serve.local.helpers import (
    _rows,
)

pytestmark = pytest.mark.skipif(
    not local_protocol.available(), reason="the same-host transport needs Linux (memfd, SCM_RIGHTS)"
)


# -- the socket file and its folder ----------------------------------------------------------------


def test_the_socket_is_private_to_this_user(server: ServerThread) -> None:
    path = server.local_socket_path
    assert path is not None
    info = os.lstat(path)
    assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_uid == os.getuid()
    folder = os.lstat(path.parent)
    assert folder.st_uid == os.getuid() and not folder.st_mode & 0o022


def test_a_server_that_cannot_bind_leaks_nothing(
    served: dict[str, ServedDataset], tmp_path: Path
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        srv = LocalServer(served, tmp_path / "missing" / "s.sock", token=None, limits=Limits())
        try:
            srv.start()
        except ArgumentError as exc:  # names the path and the option
            assert str(tmp_path / "missing") in str(exc) and "--local-socket" in str(exc)
        else:
            srv.stop()
            raise AssertionError("bound a socket in a missing folder")
        del srv
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_a_stopped_server_removes_its_socket(served: dict[str, ServedDataset]) -> None:
    srv = LocalServer(served, default_socket_path(), token=None, limits=Limits()).start()
    assert srv.path.exists()
    srv.stop()
    assert not srv.path.exists()


def test_default_socket_path_refuses_a_folder_others_can_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    runtime.chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    with pytest.raises(ArgumentError, match="--local-socket"):
        default_socket_path()
    runtime.chmod(0o700)
    assert default_socket_path().parent == runtime


def test_default_socket_path_in_tmp_refuses_a_shared_or_linked_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = tmp_path / f"mrecord-{os.getuid()}"
    path = default_socket_path()  # made 0700 on first use
    assert path.parent == folder and stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
    folder.chmod(0o757)
    with pytest.raises(ArgumentError, match="private"):
        default_socket_path()
    folder.rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    folder.symlink_to(elsewhere)  # someone else's link to a folder that looks private
    with pytest.raises(ArgumentError, match="private"):
        default_socket_path()


# -- the command line ------------------------------------------------------------------------------


def test_serve_help_names_the_local_socket_option() -> None:
    from click.testing import CliRunner

    from mrecord.cli.main import cli

    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0 and "--local-socket" in result.output


def test_local_socket_path_choices(tmp_path: Path) -> None:
    assert local_socket_path("off") is None
    assert local_socket_path(None) is None
    assert local_socket_path(str(tmp_path / "s.sock")) == tmp_path / "s.sock"
    auto = local_socket_path("auto")
    assert auto is not None and not auto.exists()
    assert not os.lstat(auto.parent).st_mode & 0o022


def _bad_socket_path(tmp_path: Path, kind: str) -> Path:
    if kind == "a_regular_file":
        path = tmp_path / "notes.txt"
        path.write_text("keep me")
        return path
    if kind == "a_missing_folder":
        return tmp_path / "missing" / "s.sock"
    return tmp_path / ("x" * 120 + ".sock")  # longer than AF_UNIX's 108 bytes


BAD_SOCKET_PATHS = ["a_regular_file", "a_missing_folder", "too_long"]


def _serve_at(mixed: Path, path: Path) -> tuple[int, str]:
    """``mrecord serve m=MIXED --local-socket PATH`` in-process (it must fail to start):
    (exit code, output)."""
    from click.testing import CliRunner

    from mrecord.cli.main import cli

    result = CliRunner().invoke(cli, ["serve", f"m={mixed}", "--local-socket", str(path)])
    return result.exit_code, result.output


@pytest.mark.parametrize("kind", BAD_SOCKET_PATHS)
def test_serve_refuses_a_socket_path_it_cannot_use(mixed: Path, tmp_path: Path, kind: str) -> None:
    path = _bad_socket_path(tmp_path, kind)
    code, output = _serve_at(mixed, path)
    assert code != 0 and "Traceback" not in output
    if kind == "a_regular_file":
        assert path.read_text() == "keep me"  # never removed: only a stale socket is


@pytest.mark.parametrize("kind", BAD_SOCKET_PATHS)
def test_serve_names_the_socket_path_it_cannot_use(mixed: Path, tmp_path: Path, kind: str) -> None:
    path = _bad_socket_path(tmp_path, kind)
    _code, output = _serve_at(mixed, path)
    error = output.split("same-host readers:")[-1].split("\n", 1)[-1]
    assert str(path) in error or "--local-socket" in error


def _start_serve(mixed: Path, sock_path: Path) -> tuple[Any, str, dict[str, Any]]:
    """``mrecord serve m=MIXED --local-socket SOCK_PATH`` on a free port, once it answers:
    (process, url, GET /api/datasets/m)."""
    import json
    import subprocess
    import sys
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        sys.executable, "-m", "mrecord.cli.main", "serve", f"m={mixed}",
        "--port", str(port), "--local-socket", str(sock_path),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/api/datasets/m") as a:
            return proc, url, json.load(a)
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read() if proc.stderr else "mrecord serve died")
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("mrecord serve did not answer")


def test_the_serve_command_serves_the_socket_it_was_given(mixed: Path, tmp_path: Path) -> None:
    sock_path = tmp_path / "serve.sock"
    proc, url, info = _start_serve(mixed, sock_path)
    try:
        assert info["local_socket"] == str(sock_path)
        assert stat.S_IMODE(os.lstat(sock_path).st_mode) == 0o600
        ds = mrecord.RemoteDataset(url, "m", transport="local", shuffle=Shuffle.INFILE)
        assert _rows(ds, 1) == _rows(MindDataset(mixed, shuffle=Shuffle.INFILE), 1)
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        _, err = proc.communicate(timeout=30)
    assert f"same-host readers: {sock_path}" in err
    assert not sock_path.exists()  # removed on the way out


def test_sigterm_removes_the_socket_too(mixed: Path, tmp_path: Path) -> None:
    sock_path = tmp_path / "serve.sock"
    proc, _url, _info = _start_serve(mixed, sock_path)
    proc.terminate()  # what systemd, docker and kubernetes send
    proc.communicate(timeout=30)
    assert not sock_path.exists()
