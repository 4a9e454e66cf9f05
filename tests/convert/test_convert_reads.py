"""``imagefolder`` reads files ahead in a pool of I/O threads: a file that cannot be read
is still named, and the default worker count is the number of cores."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mrecord.convert import SOURCES, WriteOptions, write_source
from mrecord.errors import ConversionError
from mrecord.testing.rawdata import write_image_folder


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("resize", [None, (4, 4)])
def test_file_gone_after_listing_is_named(
    tmp_path: Path, workers: int, resize: tuple[int, int] | None
) -> None:
    """A file removed between the listing and its read fails the conversion naming it
    (threads for the check, processes for --resize), and nothing is left at DST."""
    write_image_folder(tmp_path / "src", {"a": 5, "b": 4})
    dst = tmp_path / "out.mrecord"
    with SOURCES["imagefolder"](tmp_path / "src", resize=resize) as source:
        gone = sorted((tmp_path / "src" / "b").iterdir())[2]
        gone.unlink()
        with pytest.raises(ConversionError, match=rf"b/{gone.name}'?: cannot read"):
            write_source(source, dst, WriteOptions(workers=workers, batch_rows=3))
    assert not dst.exists()


def test_file_gone_is_skipped_and_listed_with_skip(tmp_path: Path) -> None:
    """With on_error='skip' the unreadable file is left out and listed in the summary."""
    write_image_folder(tmp_path / "src", {"a": 6})
    with SOURCES["imagefolder"](tmp_path / "src", on_error="skip") as source:
        gone = sorted((tmp_path / "src" / "a").iterdir())[0]
        gone.unlink()
        summary = write_source(source, tmp_path / "out.mrecord", WriteOptions(batch_rows=4))
    assert summary.rows == 5
    assert any(gone.name in problem and "cannot read" in problem for problem in summary.problems)


def test_default_workers_is_the_number_of_cores(tmp_path: Path) -> None:
    """``WriteOptions()`` works on one piece per core, and says so in the summary."""
    write_image_folder(tmp_path / "src", {"a": 3})
    with SOURCES["imagefolder"](tmp_path / "src") as source:
        summary = write_source(source, tmp_path / "out.mrecord", WriteOptions())
    assert summary.workers == (os.cpu_count() or 1)
    assert summary.rows == 3


def test_check_images_none_stores_a_damaged_file_as_it_is(tmp_path: Path) -> None:
    """``--check-images none`` stores the bytes unread; the default check fails
    naming the damaged file; the flag is refused for other kinds."""
    from click.testing import CliRunner

    from mrecord import MindDataset
    from mrecord.cli.main import cli

    write_image_folder(tmp_path / "src", {"a": 3})
    damaged = sorted((tmp_path / "src" / "a").iterdir())[1]
    damaged.write_bytes(damaged.read_bytes()[:20])  # a truncated PNG
    runner = CliRunner()
    checked = runner.invoke(
        cli,
        [
            "convert",
            "imagefolder",
            str(tmp_path / "src"),
            str(tmp_path / "checked.mrecord"),
            "--quiet",
        ],
    )
    assert checked.exit_code == 3, checked.output
    assert damaged.name in checked.output
    unchecked = runner.invoke(
        cli,
        [
            "convert",
            "imagefolder",
            str(tmp_path / "src"),
            str(tmp_path / "raw.mrecord"),
            "--quiet",
            "--check-images",
            "none",
        ],
    )
    assert unchecked.exit_code == 0, unchecked.output
    stored = [
        bytes(row["image"])
        for row in MindDataset(str(tmp_path / "raw.mrecord"), shuffle=False).create_dict_iterator(
            output_numpy=True, num_epochs=1
        )
    ]
    assert stored[1] == damaged.read_bytes()
    refused = runner.invoke(
        cli, ["convert", "csv", str(damaged), str(tmp_path / "x"), "--check-images", "none"]
    )
    assert refused.exit_code == 2 and "--check-images applies to imagefolder" in refused.output


def _jpegs(tmp_path: Path, count: int) -> list[Path]:
    """``count`` 48x40 JPEGs in class folder ``a`` (big enough to have real scan data)."""
    import numpy as np
    from PIL import Image

    folder = tmp_path / "src" / "a"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        pixels = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
        paths.append(folder / f"{i:03d}.jpg")
        Image.fromarray(pixels).save(paths[-1], quality=90)
    return paths


@pytest.mark.parametrize("check", [True, "structure", "decode"])
def test_truncated_jpeg_is_caught_at_any_cut(tmp_path: Path, check: bool | str) -> None:
    """Cut anywhere (in the header or in the scan), a JPEG fails the check naming it."""
    paths = _jpegs(tmp_path, 6)
    whole = paths[3].read_bytes()
    for cut in (10, whole.find(b"\xff\xda") + 5, len(whole) // 2, len(whole) - 2):
        paths[3].write_bytes(whole[:cut])
        with (
            SOURCES["imagefolder"](tmp_path / "src", check=check) as source,
            pytest.raises(ConversionError, match=r"a/003\.jpg"),
        ):
            write_source(source, tmp_path / f"out{cut}.mrecord", WriteOptions(workers=1))


def test_jpeg_with_bytes_after_its_end_is_accepted(tmp_path: Path) -> None:
    """Trailing bytes after the end-of-image marker (some cameras append data) are kept,
    as decoders accept them."""
    paths = _jpegs(tmp_path, 2)
    paths[1].write_bytes(paths[1].read_bytes() + b"trailing data")
    with SOURCES["imagefolder"](tmp_path / "src") as source:
        summary = write_source(source, tmp_path / "out.mrecord", WriteOptions(workers=1))
    assert summary.rows == 2


def test_check_mode_is_validated() -> None:
    """An unknown check mode is refused, naming the choices."""
    from mrecord.errors import ArgumentError

    with pytest.raises(ArgumentError, match="structure"):
        SOURCES["imagefolder"](".", check="fast")


def test_files_are_asked_for_ahead_of_their_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold folder is read with the kernel already fetching the coming files: each file
    is advised (POSIX_FADV_WILLNEED) before it is read, a window of pieces ahead."""
    from mrecord.convert import imagefolder

    write_image_folder(tmp_path / "src", {"a": 70, "b": 60})
    events: list[tuple[str, str]] = []
    real_advise, real_read = os.posix_fadvise, imagefolder._OpenedAhead.read

    def advise(fd: int, offset: int, length: int, advice: int) -> None:
        if advice == os.POSIX_FADV_WILLNEED:
            events.append(("advise", os.readlink(f"/proc/self/fd/{fd}")))
        real_advise(fd, offset, length, advice)

    def read(self: imagefolder._OpenedAhead, path: Path) -> imagefolder._Loaded:
        events.append(("read", str(path)))
        time.sleep(0.005)  # a slow disk: the files ahead get asked for meanwhile
        return real_read(self, path)

    monkeypatch.setattr(os, "posix_fadvise", advise)
    monkeypatch.setattr(imagefolder._OpenedAhead, "read", read)
    with SOURCES["imagefolder"](tmp_path / "src") as source:
        summary = write_source(source, tmp_path / "out.mrecord", WriteOptions(workers=1))
    assert summary.rows == 130
    advised_at: dict[str, int] = {}
    for i, (kind, path) in enumerate(events):
        if kind == "advise":
            advised_at.setdefault(path, i)
    reads = [(i, path) for i, (kind, path) in enumerate(events) if kind == "read"]
    assert len(reads) == 130
    for k, (i, path) in enumerate(reads):
        # deterministic: a piece is handed to a worker only after its files were asked for
        assert advised_at[path] < i, f"{path} read before it was asked for"
        # and, once the first file is read, the next piece is asked for while this one is
        # read (the window ahead)
        ahead = sum(1 for at in advised_at.values() if at < i)
        assert k == 0 or ahead >= min(130, k + 33), f"only {ahead - k} files in flight at read {k}"


def test_files_opened_ahead_read_as_they_are(tmp_path: Path) -> None:
    """Read through the descriptor opened ahead: the file's bytes whatever its size
    (empty, one byte, larger than one read), grown after it was opened, or why it cannot
    be read when it was gone before; descriptors never read are closed with the reader."""
    import gc

    from mrecord.convert.imagefolder import _OpenedAhead

    sizes = {"empty": 0, "one": 1, "some": 100_000, "big": 3 << 20}
    paths = {}
    for name, size in sizes.items():
        paths[name] = tmp_path / name
        paths[name].write_bytes(os.urandom(size))
    grown = tmp_path / "grown"
    grown.write_bytes(b"abc")
    gone = tmp_path / "gone"
    ahead = _OpenedAhead()
    ahead.open([*paths.values(), grown, gone])
    with grown.open("ab") as f:
        f.write(b"def")
    for path in paths.values():  # each with its size and time as read, for a resume
        st = path.stat()
        assert ahead.read(path) == (path.read_bytes(), st.st_size, st.st_mtime_ns)
    assert ahead.read(grown)[:2] == (b"abcdef", 6)
    why, size, mtime = ahead.read(gone)
    assert isinstance(why, str) and why.startswith("cannot read: ")
    assert (size, mtime) == (-1, -1)  # not stated: a resume finds it gone as well
    assert ahead.read(paths["one"])[0] == paths["one"].read_bytes()  # again: opened anew

    unread = _OpenedAhead()
    unread.open(list(paths.values()))
    fds = dict(unread._fds)
    assert {os.readlink(f"/proc/self/fd/{fd}") for fd in fds.values()} == {
        str(p) for p in paths.values()
    }
    del unread
    gc.collect()
    for opened, fd in fds.items():  # closed (a number another thread reused names another file)
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:
            continue
        assert target != str(opened), f"descriptor {fd} of {opened} left open"


def test_a_default_image_folder_conversion_imports_no_process_machinery(
    tmp_path: Path,
) -> None:
    """The default structure check works in the converting process (one worker), so
    ``mrecord convert imagefolder`` never imports ``multiprocessing`` or the process pool:
    ~30 ms of a cold start-up, before the first file is read."""
    import subprocess
    import sys
    import textwrap

    write_image_folder(tmp_path / "src", {"a": 3, "b": 2})
    script = textwrap.dedent(
        f"""
        import sys
        from mrecord.cli.main import main
        sys.argv = ["mrecord", "convert", "imagefolder", {str(tmp_path / "src")!r},
                    {str(tmp_path / "out.mrecord")!r}]
        try:
            main()
        except SystemExit as stop:
            assert not stop.code, stop.code
        print(sorted(m for m in sys.modules if m.startswith(("multiprocessing",
              "concurrent.futures.process"))))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
    assert (tmp_path / "out.mrecord").exists()
