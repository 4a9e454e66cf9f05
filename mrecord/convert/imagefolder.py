"""A folder of class subfolders of images as a conversion source.

::

    root/cat/001.jpg   -> label 0   (class subfolders sorted by name)
    root/dog/a/7.png   -> label 1   (files found recursively, sorted)

The folder is walked by the same code as ``ImageFolderDataset``
(:func:`mrecord.rawdata.imagefolder.walk_image_folder`), keeping the files with an
image extension (any case).

Rows: ``image`` (the file's bytes as they are, unless ``resize``/``reencode``),
``label`` (int32) and ``file_name`` (path relative to ``root``, with ``/``).
The class ↔ label mapping is stored as JSON in the dataset description.

Every image is checked before it is stored (``check``): ``"structure"`` (the default,
``True``) checks its header (for a JPEG, :func:`mrecord.convert.jpeg_header.jpeg_header_ok`
walks the segments, and Pillow parses the ones it is not sure of) and, for a JPEG, finds
the end-of-image marker after its scans (a truncated file has none); a PNG's chunks are
walked with their CRCs (:func:`mrecord.convert.png_chunks.png_chunks_ok`; Pillow decodes
the ones it is not sure of); images of other formats are decoded;
``"decode"`` also decodes JPEGs (at 1/8 scale), about 8 times the work for little more:
measured on 300 of the bench's JPEGs, both caught every truncation, and 10 random bytes
changed inside the compressed data were caught in 9 of 300 files by the decode and in
none by the structure check (libjpeg only warns about most damaged data);
``"none"`` (``False``) stores the files unread. Unreadable images
are never dropped silently: with ``on_error="raise"`` (default) the conversion
fails listing every bad file; with ``"skip"`` they are left out and listed in
``problems`` (shown in the conversion summary).

Reading: as each piece of files is handed to a worker, the kernel is asked to start
reading them (``POSIX_FADV_WILLNEED``), a window of pieces ahead; the worker then reads
each file in turn, mostly from memory. Worker threads read through the descriptor the
file was opened with for the advice (:class:`_OpenedAhead`); worker processes open it
again (:func:`_will_need`).

Resuming: the resume key holds the listing (names and labels in row order) and the
options; each file's size and modification time are noted from the descriptor it is read
through, and a checkpoint keeps a digest of those of the files already converted
(:mod:`mrecord.convert.converted_files`), checked again on resume.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, overload

import numpy as np

from mrecord.convert._pillow import describe_image_error, require_pillow
from mrecord.convert.base import Batch, Source, check_batch_rows
from mrecord.convert.converted_files import (
    NOT_STATED,
    ConvertedFiles,
    FileStat,
    size_and_time,
)
from mrecord.convert.jpeg_header import jpeg_header_ok
from mrecord.convert.parallel import BatchPlan, default_workers, run_plan
from mrecord.convert.png_chunks import png_chunks_ok
from mrecord.errors import ArgumentError, ConversionError
from mrecord.format.features import describe
from mrecord.rawdata.imagefolder import walk_image_folder

__all__ = ["IMAGE_EXTENSIONS", "ImageFolderSource"]

# Rows per batch: rows are whole files (~100 KB): 4,096 of them were 400 MB per batch,
# three or four batches in memory at once (844 MB peak for 20,000 JPEGs, every page
# touched fresh); 256 rows: 181 MB peak and 10% faster (docs/CONVERT.md).
_BATCH_ROWS = 256

IMAGE_EXTENSIONS = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm"}
)
_FORMATS = {"jpeg": "JPEG", "jpg": "JPEG", "png": "PNG", "webp": "WEBP", "bmp": "BMP"}
_MAX_LISTED = 20


_FINGERPRINT_ITEMS = 1 << 14
"""Files of the listing hashed at a time by :meth:`ImageFolderSource.fingerprint`."""


def _parse_resize(resize: int | Sequence[int] | None) -> tuple[int, int] | None:
    if resize is None:
        return None
    size = (resize, resize) if isinstance(resize, int) else tuple(resize)
    if len(size) != 2 or not all(isinstance(s, int) and s > 0 for s in size):
        raise ArgumentError(f"resize must be a positive int or (width, height), got {resize!r}")
    return (int(size[0]), int(size[1]))


class ImageFolderSource(Source):
    """An image folder → rows ``image`` (bytes), ``label`` (int32), ``file_name`` (string)."""

    default_batch_rows: ClassVar[int] = _BATCH_ROWS

    kind = "imagefolder"

    def __init__(
        self,
        src: str | os.PathLike[str],
        *,
        resize: int | Sequence[int] | None = None,
        reencode: str | None = None,
        quality: int = 95,
        on_error: str = "raise",
        check: bool | str = True,
        workers: int | None = None,
        items: Sequence[tuple[str | Path, int]] | None = None,
        classes: Sequence[str] | None = None,
    ):
        """``items``/``classes``: convert just these ``(file, label)`` pairs of the folder's
        listing (a distributed conversion splits one listing among tasks); listed when None."""
        if on_error not in ("raise", "skip"):
            raise ArgumentError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if reencode is not None and reencode.lower() not in _FORMATS:
            raise ArgumentError(f"reencode must be one of {sorted(_FORMATS)}, got {reencode!r}")
        self.root = Path(src)
        self._root_prefix = os.path.join(str(self.root), "")
        self.resize = _parse_resize(resize)
        self.reencode = _FORMATS[reencode.lower()] if reencode else None
        self.quality = quality
        self.on_error = on_error
        self.check = _check_mode(check)
        if self.check == "none" and (self.resize is not None or self.reencode is not None):
            self.check = "decode"  # resizing and re-encoding decode every image anyway
        self.workers = workers
        if items is None or classes is None:
            listing = walk_image_folder(self.root, extensions=IMAGE_EXTENSIONS, ignore_case=True)
            self.classes = list(listing.classes)
            self.items: Sequence[tuple[str | Path, int]] = _Items(listing.paths, listing.labels)
            ignored = listing.ignored
        else:
            self.classes, self.items, ignored = list(classes), list(items), []
        # (batch, file name, why) of each unreadable image, in row order
        self._bad: list[tuple[int, str, str]] = []
        self._converted = ConvertedFiles()
        self._restored: tuple[ConvertedFiles, list[tuple[int, str, str]]] | None = None
        desc = {
            "source": "imagefolder",
            "classes": {name: i for i, name in enumerate(self.classes)},
        }
        super().__init__(
            name=str(src),
            schema={
                "image": {"type": "bytes"},
                "label": {"type": "int32"},
                "file_name": {"type": "string"},
            },
            desc=describe(desc, class_names={"label": self.classes}, images=["image"]),
            num_rows=len(self.items),
            index_fields=["label"],
        )
        if ignored:
            shown = ", ".join(repr(self._rel(p)) for p in ignored[:_MAX_LISTED])
            more = f" and {len(ignored) - _MAX_LISTED} more" if len(ignored) > _MAX_LISTED else ""
            self.problems.append(
                f"ignored {len(ignored)} file(s) without an image extension: {shown}{more}"
            )

    @property
    def bad_files(self) -> list[tuple[str, str]]:
        """``(file name, why)`` of each unreadable image found so far, in row order."""
        return [(name, why) for _, name, why in self._bad]

    def _rel(self, path: str | Path) -> str:
        # Listed paths start with the root's own text: cut it (20,000 pathlib calls were
        # 0.4 s of a conversion's main thread); others (given items) take pathlib's way.
        text, prefix = str(path), self._root_prefix
        if text.startswith(prefix):
            return text[len(prefix) :].replace(os.sep, "/")
        return Path(path).relative_to(self.root).as_posix()

    def _loader(self) -> _Loader:
        return _Loader(self.resize, self.reencode, self.quality, self.check)

    def iter_batches(self, batch_rows: int = _BATCH_ROWS) -> Iterator[Batch]:
        """Yield rows in (class, path) order; files are read and checked by ``workers``
        threads (default: one per core)."""
        plan = self.plan(batch_rows)
        for _b, batch in run_plan(plan, workers=self.workers or default_workers()):
            if batch is not None:
                yield batch

    def plan(self, batch_rows: int = _BATCH_ROWS) -> BatchPlan[Any, Any]:
        """Batches of ``batch_rows`` files in (class, path) order, read, checked and
        resized/re-encoded in pieces of at most ``_PIECE_ROWS`` files."""
        check_batch_rows(batch_rows)
        # A resumed run goes on with what its checkpoint kept; another starts afresh.
        self._converted, self._bad = self._restored or (ConvertedFiles(), [])
        self._restored = None
        loader = self._loader()
        light = loader.resize is None and loader.reencode is None and loader.check != "decode"
        items = self.items

        def pieces(b: int) -> list[list[str | Path]]:
            paths = [p for p, _ in items[b * batch_rows : (b + 1) * batch_rows]]
            return [paths[i : i + _PIECE_ROWS] for i in range(0, len(paths), _PIECE_ROWS)]

        def collect(b: int, results: list[list[_Loaded]]) -> Batch | None:
            chunk = items[b * batch_rows : (b + 1) * batch_rows]
            loaded = [one for piece in results for one in piece]
            images: list[bytes] = []
            labels: list[int] = []
            names: list[str] = []
            read: list[FileStat] = []
            for (path, label), (data, size, mtime) in zip(chunk, loaded, strict=True):
                name = self._rel(path)
                read.append((name, size, mtime))
                if isinstance(data, str):
                    self._bad.append((b, name, data))
                    continue
                images.append(data)
                labels.append(label)
                names.append(name)
            self._converted.note(b, read)
            if images and not (self.on_error == "raise" and self._bad):
                return {
                    "image": images,
                    "label": np.asarray(labels, dtype=np.int32),
                    "file_name": names,
                }
            return None

        # Pillow's JPEG decoder (the check) releases the GIL, its encoders do not.
        in_threads = loader.resize is None and loader.reencode is None
        if in_threads:
            # Threads share this process's descriptors: each file is opened once, as it
            # is asked for ahead, and read through the same descriptor.
            ahead = _OpenedAhead()
            prepare, work = ahead.open, functools.partial(_load_opened, loader, ahead)
        else:
            prepare, work = _will_need, functools.partial(_load_piece, loader)
        return BatchPlan(
            num_batches=-(-len(items) // batch_rows),
            pieces=pieces,
            work=work,
            collect=collect,
            finish=self._finish,
            releases_gil=in_threads,
            prepare=prepare,
            # The structure check is a few us per file and the reads are asked for
            # ahead: more threads only contend for the GIL (16 cores: 1 worker 3.2 s,
            # 2 3.4 s, 16 4.3 s for 20,000 files, docs/CONVERT.md).
            max_workers=1 if light else None,
        )

    def fingerprint(self) -> str:
        """The listing (each file's name and label, in row order) and the options that
        change the stored bytes. The files' sizes and times are not stated here: those
        of the files converted before a checkpoint are checked by :meth:`restore_state`
        (a million files' stats cost a conversion of small files a fifth of its time)."""
        loader = self._loader()
        options = f"{loader.resize}:{loader.reencode}:{loader.quality}:{self.on_error}"
        digest = hashlib.sha256()
        items = self.items
        for lo in range(0, len(items), _FINGERPRINT_ITEMS):
            # a part of the listing at a time: joined whole, the text of 300K files' names
            # doubled the listing's memory (41 MB more at its peak)
            part = "".join(
                f"{self._rel(p)}\0{label}\n" for p, label in items[lo : lo + _FINGERPRINT_ITEMS]
            )
            digest.update(part.encode("utf-8", "surrogateescape"))
        return f"{digest.hexdigest()}:{options}"

    def resume_state(self, position: int) -> dict[str, Any]:
        """The problems, the bad files of the batches before ``position``, and the digest
        of the files those batches were read from."""
        bad = [[name, why, b] for b, name, why in list(self._bad) if b < position]
        return {
            **super().resume_state(position),
            "bad_files": bad,
            "converted": self._converted.state(position),
        }

    def restore_state(self, state: dict[str, Any]) -> None:
        """Take back the problems and bad files of a checkpoint, after checking that the
        files it converted are unchanged (:class:`~mrecord.errors.CheckpointError`
        naming them otherwise)."""
        super().restore_state(state)

        def first_files(count: int) -> list[tuple[str, str]]:
            return [(self._rel(p), os.fspath(p)) for p, _ in self.items[:count]]

        converted = ConvertedFiles.restore(state.get("converted"), first_files, str(self.root))
        bad = [(int(b), str(name), str(why)) for name, why, b in state.get("bad_files", [])]
        self._restored = (converted, bad)

    def _finish(self) -> None:
        bad = self.bad_files
        if not bad:
            return
        listed = "; ".join(f"{name!r}: {why}" for name, why in bad[:_MAX_LISTED])
        more = f"; and {len(bad) - _MAX_LISTED} more" if len(bad) > _MAX_LISTED else ""
        message = f"{len(bad)} unreadable image(s) in {str(self.root)!r}: {listed}{more}"
        if self.on_error == "raise":
            raise ConversionError(
                f"{message} (fix or remove them, or skip them with on_error='skip' / "
                "--skip-bad-images)"
            )
        self.problems.append(f"skipped {message}")


_PIECE_ROWS = 32  # files per piece of work sent to a worker


class _Items(Sequence[tuple[str | Path, int]]):
    """``(path, label)`` of each listed file, in row order: a view over the listing's two
    lists (a tuple a file was 62 MB of a million-file conversion's memory)."""

    def __init__(self, paths: Sequence[str], labels: Sequence[int]) -> None:
        self._paths, self._labels = paths, labels

    def __len__(self) -> int:
        return len(self._paths)

    @overload
    def __getitem__(self, index: int) -> tuple[str | Path, int]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[str | Path, int]]: ...

    def __getitem__(
        self, index: int | slice
    ) -> tuple[str | Path, int] | list[tuple[str | Path, int]]:
        if isinstance(index, slice):
            return list(zip(self._paths[index], self._labels[index], strict=True))
        return self._paths[index], self._labels[index]

    def __iter__(self) -> Iterator[tuple[str | Path, int]]:
        return zip(self._paths, self._labels, strict=True)


@dataclass(frozen=True)
class _Loader:
    """What turning an image file into the bytes to store depends on (picklable)."""

    resize: tuple[int, int] | None
    reencode: str | None
    quality: int
    check: str  # "structure", "decode" or "none"

    def convert(self, data: bytes | str) -> bytes | str:
        """The bytes to store for a file's ``data`` (or the reason it is unreadable:
        a ``str`` passes through)."""
        if isinstance(data, str) or self.check == "none":
            return data
        if (
            self.resize is None
            and self.reencode is None
            and self.check == "structure"
            and ((jpeg_header_ok(data) and _jpeg_complete(data)) or png_chunks_ok(data))
        ):
            # A well-formed JPEG: what Pillow's header parse would tell, without it
            # (0.07 ms of Python per image holding the GIL; this walk is a few us). A
            # whole PNG whose chunks match their CRCs: Pillow's decode took ~40 us of a
            # 28x28 one. Anything else takes Pillow's path below, which names the problem.
            return data
        image_mod = require_pillow()
        try:
            with image_mod.open(io.BytesIO(data)) as img:
                if self.resize is None and self.reencode is None:
                    if img.format == "JPEG" and self.check == "structure":
                        return data if _jpeg_complete(data) else _TRUNCATED_JPEG
                    if img.format == "JPEG":
                        # Decode at 1/8 scale: every entropy-coded block is still read,
                        # so truncation and corruption are caught, at a fraction of the cost.
                        img.draft(img.mode, (max(1, img.width // 8), max(1, img.height // 8)))
                    img.load()
                    return data
                fmt = self.reencode or img.format or "PNG"
                out = img.convert("RGB") if fmt == "JPEG" and img.mode != "RGB" else img
                if self.resize is not None:
                    out = out.resize(self.resize)
                buf = io.BytesIO()
                kwargs = {"quality": self.quality} if fmt in ("JPEG", "WEBP") else {}
                out.save(buf, format=fmt, **kwargs)
                return buf.getvalue()
        except Exception as exc:  # Pillow raises many types for bad images
            return describe_image_error(exc, data)


_CHECKS = ("structure", "decode", "none")
_TRUNCATED_JPEG = (
    "not a readable image: truncated JPEG (no end-of-image marker after its scans; "
    "copy the file again from its source)"
)


def _check_mode(check: bool | str) -> str:
    """``check`` as one of ``_CHECKS`` (``True`` is ``"structure"``, ``False`` ``"none"``)."""
    if check is True:
        return "structure"
    if check is False:
        return "none"
    if check not in _CHECKS:
        raise ArgumentError(f"check must be True, False or one of {list(_CHECKS)}, got {check!r}")
    return str(check)


def _jpeg_complete(data: bytes) -> bool:
    """Whether JPEG ``data`` has an end-of-image marker (FF D9) after its first scan.

    Inside a scan's compressed data every FF byte is followed by 00 (byte stuffing), so
    FF D9 there can only be the marker; an EXIF thumbnail's own FF D9 comes before the
    first scan (SOS, FF DA). Bytes after the marker are allowed, as decoders allow them."""
    first_scan = data.find(b"\xff\xda")
    return first_scan > 0 and data.rfind(b"\xff\xd9") > first_scan


_Loaded = tuple[bytes | str, int, int]
"""A file's bytes to store (or why it is unreadable), and its size and ``st_mtime_ns``
as it was read (``NOT_STATED`` when it could not be stated)."""


def _read_file(path: str | Path) -> _Loaded:
    """The bytes of ``path`` with its size and time, or why it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        return (f"cannot read: {exc.strerror or exc}", *_stat_of(path))
    return _read_through(fd)


def _stat_of(path: str | Path) -> tuple[int, int]:
    """Size and time of a file that could not be opened, as a resume states it again."""
    try:
        return size_and_time(os.stat(path))
    except OSError:
        return size_and_time(None)


def _read_through(fd: int) -> _Loaded:
    """Read the file open as ``fd`` to its end, then close it."""
    size = mtime = NOT_STATED
    try:
        size, mtime = size_and_time(os.fstat(fd))
        data = os.read(fd, size) if size else b""
        if len(data) < size or not size:  # read to the end: a size is only a hint
            parts = [data]
            while part := os.read(fd, 1 << 20):
                parts.append(part)
            data = b"".join(parts)
        return data, size, mtime
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}", size, mtime
    finally:
        os.close(fd)


def _will_need(paths: list[str | Path]) -> None:
    """Ask the kernel to start reading ``paths`` (``POSIX_FADV_WILLNEED``) and return at
    once; errors are left to the read, which names them.

    One thread keeping reads in flight this way read a cold folder of 100 KB JPEGs
    at 1,096 MB/s where 8 threads each reading a file read at 547 MB/s, with a fifth
    of the CPU time: the threads' handoffs (the GIL, once per system call) cost more
    system time than the reads (docs/CONVERT.md, "Parallel conversion on one host")."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            advise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(fd)


class _OpenedAhead:
    """Files opened and asked for ahead (``POSIX_FADV_WILLNEED``), each read later through
    the descriptor it was opened with, in the same process.

    Opening a file once instead of twice (for the advice, then for the read) and reading
    it with ``os.read`` instead of ``Path.read_bytes`` read a cold folder of 20,000 JPEGs
    in 1.9 s instead of 2.5 s with 0.5 s less CPU (docs/CONVERT.md). Descriptors of files
    never read (a conversion that stopped on the way) are closed when this is collected.
    """

    def __init__(self) -> None:
        self._fds: dict[str | Path, int] = {}
        weakref.finalize(self, _close_all, self._fds)

    def open(self, paths: list[str | Path]) -> None:
        """Open ``paths`` and ask the kernel to start reading them; return at once (a
        file that cannot be opened is left to :meth:`read`, which names the error)."""
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            if hasattr(os, "posix_fadvise"):
                with contextlib.suppress(OSError):
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            self._fds[path] = fd

    def read(self, path: str | Path) -> _Loaded:
        """The bytes of ``path`` (through its descriptor when opened ahead) with its size
        and time, or why it cannot be read."""
        fd = self._fds.pop(path, None)
        if fd is None:
            return _read_file(path)
        return _read_through(fd)


def _close_all(fds: dict[str | Path, int]) -> None:
    for fd in fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()


def _load_opened(loader: _Loader, ahead: _OpenedAhead, paths: list[str | Path]) -> list[_Loaded]:
    """Run in a worker thread: like :func:`_load_piece`, each file read through the
    descriptor :meth:`_OpenedAhead.open` kept for it."""
    return [_converted(loader, ahead.read(p)) for p in paths]


def _load_piece(loader: _Loader, paths: list[str | Path]) -> list[_Loaded]:
    """Run in a worker: the stored bytes (or the reason it is unreadable) of each file,
    with its size and time as read.

    The plan's ``prepare`` (:func:`_will_need`) has already asked the kernel for these
    files, up to a window of pieces ahead, so these reads mostly copy from memory."""
    return [_converted(loader, _read_file(p)) for p in paths]


def _converted(loader: _Loader, loaded: _Loaded) -> _Loaded:
    data, size, mtime = loaded
    return loader.convert(data), size, mtime
