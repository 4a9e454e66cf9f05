"""What an image folder's checkpoint remembers of its source, and what a resume checks.

The converter reads a few batches ahead of what it has written (``prefetch``), so what
a checkpoint keeps must be the state of the batches written before it, not of the ones
read ahead: a skipped image in a batch read ahead was listed twice after a resume.

A resumed conversion must end with the bytes a clean run writes from the folder as it is
now. So a resume is refused when the listing changed (rows would move) or when a file
already converted changed since it was read (its row would be stale); a file not yet
converted may change freely, and the resumed run stores it as it is now.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from mrecord.convert import SOURCES, WriteOptions, write_source
from mrecord.convert.driver import ConversionSummary
from mrecord.errors import ArgumentError, CheckpointError
from mrecord.reader.dataset_reader import DatasetReader
from reliability import convert_crash as cc

IMAGES = 60
_OPTIONS = WriteOptions(page_size=cc.PAGE_SIZE, batch_rows=cc.BATCH_ROWS, checkpoint_bytes=1)


def _files(root: Path) -> list[Path]:
    """The folder's images in the source's row order (classes, then names)."""
    return sorted(root.rglob("*.*"), key=lambda p: (p.parent.name, p.name))


def _interrupt_at_batch(stop_at: int, pause: float = 0.0) -> Callable[[int], None]:
    """A progress callback that pauses after the first batch (letting the reads run
    ahead) and raises KeyboardInterrupt once batch ``stop_at`` is written, before its
    checkpoint: the conversion then resumes from the checkpoint after batch ``stop_at - 1``."""
    seen = [0]

    def progress(rows: int) -> None:
        seen[0] += 1
        if seen[0] == 1 and pause:
            time.sleep(pause)
        if seen[0] == stop_at + 1:
            raise KeyboardInterrupt

    return progress


def _convert(
    images: Path,
    dst: Path,
    *,
    resume: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ConversionSummary:
    with SOURCES["imagefolder"](images, on_error="skip") as source:
        return write_source(source, dst, replace(_OPTIONS, resume=resume), progress=progress)


def _images(dst: Path) -> list[bytes]:
    with DatasetReader.open(dst) as reader:
        return [bytes(row["image"]) for row in reader.iter_rows()]


def _killed(images: Path, dst: Path, stop_at: int, pause: float = 0.0) -> None:
    with pytest.raises(KeyboardInterrupt):
        _convert(images, dst, progress=_interrupt_at_batch(stop_at, pause))


def test_skipped_images_are_listed_once_each_after_a_resume(tmp_path: Path) -> None:
    """One bad image written before the checkpoint, one read ahead of it."""
    images = cc.make_image_folder(tmp_path / "images", IMAGES)
    files = _files(images)
    bad = [files[1], files[2 * cc.BATCH_ROWS + 1]]  # in the first and the third batch
    for path in bad:
        path.write_bytes(b"not an image")
    clean = _convert(images, tmp_path / "clean.mrecord")
    assert all(any(path.name in p for p in clean.problems) for path in bad)

    dst = tmp_path / "x.mrecord"
    # After the first batch the reads run ahead over the second bad file; the kill comes
    # once the second batch is written, so the resume starts at the second batch.
    _killed(images, dst, stop_at=1, pause=0.5)
    resumed = _convert(images, dst, resume=True)
    assert resumed.problems == clean.problems
    assert resumed.rows == clean.rows == IMAGES - 2
    assert _images(dst) == _images(tmp_path / "clean.mrecord")


def test_a_file_not_yet_converted_may_change_before_the_resume(tmp_path: Path) -> None:
    images = cc.make_image_folder(tmp_path / "images", IMAGES)
    dst = tmp_path / "x.mrecord"
    _killed(images, dst, stop_at=2)
    late = _files(images)[-1]  # in the last batch, not converted yet
    replacement = cc.make_image_folder(tmp_path / "other", 1, seed=7)
    late.write_bytes(next(replacement.rglob("*.*")).read_bytes())
    resumed = _convert(images, dst, resume=True)
    clean = _convert(images, tmp_path / "clean.mrecord")
    assert resumed.rows == clean.rows == IMAGES
    # Same rows as a clean run of the folder as it is now (ids aside: compare the rows).
    assert _images(dst) == _images(tmp_path / "clean.mrecord")
    assert late.read_bytes() in _images(dst)


def test_a_converted_file_changed_since_is_refused_naming_it(tmp_path: Path) -> None:
    images = cc.make_image_folder(tmp_path / "images", IMAGES)
    dst = tmp_path / "x.mrecord"
    _killed(images, dst, stop_at=2)
    early = _files(images)[1]  # in the first batch, converted and checkpointed
    data = early.read_bytes()
    early.write_bytes(data + b"\0")
    with pytest.raises(CheckpointError) as info:
        _convert(images, dst, resume=True)
    message = str(info.value)
    assert early.name in message and "--resume" in message


def test_a_converted_file_touched_with_the_same_size_is_refused(tmp_path: Path) -> None:
    images = cc.make_image_folder(tmp_path / "images", IMAGES)
    dst = tmp_path / "x.mrecord"
    _killed(images, dst, stop_at=2)
    early = _files(images)[0]
    st = early.stat()
    os.utime(early, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with pytest.raises(CheckpointError):
        _convert(images, dst, resume=True)


def test_a_file_added_to_the_folder_is_refused(tmp_path: Path) -> None:
    images = cc.make_image_folder(tmp_path / "images", IMAGES)
    dst = tmp_path / "x.mrecord"
    _killed(images, dst, stop_at=2)
    first = _files(images)[0]
    (first.parent / ("0" + first.name)).write_bytes(first.read_bytes())  # sorts first
    with pytest.raises(CheckpointError):
        _convert(images, dst, resume=True)


def test_a_checkpoint_digests_exactly_the_batches_before_it(tmp_path: Path) -> None:
    """With batches noted ahead of the checkpoint (read ahead), the checkpoint's record
    covers the files of the batches before its position and no others, and a resume
    states the same files to the same digest."""
    from mrecord.convert.converted_files import ConvertedFiles

    paths = []
    for i in range(10):
        path = tmp_path / f"{i}.bin"
        path.write_bytes(bytes(i))
        paths.append(path)
    files = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in paths]
    batches = [files[0:3], files[3:6], files[6:9], files[9:]]
    record = ConvertedFiles()
    for b, batch in enumerate(batches[:3]):  # the third batch read ahead of the checkpoint
        record.note(b, batch)
    state = record.state(2)
    assert (state["batches"], state["files"]) == (2, 6)
    record.note(3, batches[3])
    assert record.state(4)["files"] == 10  # later checkpoints go on from there
    pairs = [(p.name, str(p)) for p in paths]
    again = ConvertedFiles.restore(state, lambda n: pairs[:n], str(tmp_path))
    again.note(2, batches[2])
    again.note(3, batches[3])
    assert again.state(4)["digest"] == record.state(4)["digest"]
    with pytest.raises(ArgumentError, match="in order"):
        again.note(5, [])
