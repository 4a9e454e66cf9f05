"""Image folders: one subfolder per class, walked in a fixed order.

::

    root/cat/001.jpg   -> label 0   (class subfolders sorted by name)
    root/dog/a/7.png   -> label 1   (files sorted inside each folder; subfolders walked too)

The walk is a pure listing (no file is opened): ``classes`` maps each class
folder to its label, ``paths``/``labels`` list the images in order (``files``: the
same as ``Path`` objects), ``ignored`` the files whose extension was not asked for.
Hidden entries (``.name``) are skipped. Extensions are matched exactly (``".JPEG"`` is
not ``".jpeg"``) unless ``ignore_case``.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mrecord.block import BytesArray
from mrecord.errors import ArgumentError, DecodeError, RawDataError, WrongTypeError
from mrecord.rawdata.common import check_dir
from mrecord.rawdata.path_list import PathList

__all__ = ["ImageFolderListing", "load_image", "walk_image_folder"]


@dataclass
class ImageFolderListing:
    """What :func:`walk_image_folder` found."""

    root: Path
    classes: dict[str, int]
    paths: PathList = field(default_factory=PathList)
    """Each image's path as text (the class folder's path joined with the name), kept
    compactly (a ``str`` a file was 96 MB of a million-file listing)."""
    labels: array[int] = field(default_factory=lambda: array("i"))
    ignored: list[Path] = field(default_factory=list)

    @property
    def files(self) -> list[Path]:
        """``paths`` as ``Path`` objects (made on each call: a ``Path`` per image cost
        most of a 100,000-image listing, 0.45 s, which a conversion does not need)."""
        return [Path(p) for p in self.paths]

    def label_array(self) -> np.ndarray:
        """The labels as ``int32[n]``."""
        return np.asarray(self.labels, dtype=np.int32)


def _check_class_indexing(class_indexing: object) -> dict[str, int] | None:
    if class_indexing is None:
        return None
    if not isinstance(class_indexing, Mapping):
        raise WrongTypeError(
            f"class_indexing must be a dict of folder name to int, got {class_indexing!r}"
        )
    for name, label in class_indexing.items():
        if not isinstance(name, str) or isinstance(label, bool) or not isinstance(label, int):
            raise WrongTypeError(
                f"class_indexing must map folder names (str) to labels (int), got "
                f"{name!r}: {label!r}"
            )
        if label < 0:
            raise ArgumentError(f"class_indexing labels must be >= 0, got {name!r}: {label!r}")
    return dict(class_indexing)


def walk_image_folder(
    root: str | os.PathLike[str],
    *,
    extensions: Collection[str] | None = None,
    class_indexing: Mapping[str, int] | None = None,
    ignore_case: bool = False,
) -> ImageFolderListing:
    """List the images of an image folder (see the module docstring).

    ``extensions``: keep only files ending with one of them (None: every file).
    ``class_indexing``: read only these class folders, with these labels (default:
    every class folder, labelled 0, 1, ... in name order).
    """
    folder = check_dir(root, "class subfolders of images (root/CLASS/IMAGE)")
    indexing = _check_class_indexing(class_indexing)
    present = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if indexing is None:
        if not present:
            raise RawDataError(
                f"image folder {str(folder)!r} has no class subfolders (expected root/CLASS/IMAGE)"
            )
        classes = {name: i for i, name in enumerate(present)}
    else:
        missing = sorted(set(indexing) - set(present))
        if missing:
            raise RawDataError(
                f"class_indexing names {missing!r}, but {str(folder)!r} has no such "
                f"subfolder (its class folders are {present!r})"
            )
        classes = indexing
    wanted = None
    if extensions is not None:
        wanted = {e.lower() if ignore_case else e for e in extensions}
    listing = ImageFolderListing(folder, classes)
    for cls in sorted(classes):
        for dirpath, dirnames, filenames in os.walk(folder / cls):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            names = sorted(f for f in filenames if not f.startswith("."))
            prefix = os.path.join(dirpath, "")  # the text Path(dirpath) / name has
            kept = []
            for fname in names:
                suffix = _suffix(fname).lower() if ignore_case else _suffix(fname)
                if wanted is None or suffix in wanted:
                    kept.append(fname)
                else:
                    listing.ignored.append(Path(dirpath) / fname)
            listing.paths.extend(prefix, kept)
            listing.labels.extend([classes[cls]] * len(kept))
    return listing


def _suffix(name: str) -> str:
    """``Path(name).suffix`` of a plain file name, without making a ``Path``."""
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def load_image(path: str | Path, *, decode: bool = False) -> np.ndarray:
    """One image file: its bytes as a ``uint8`` array, or decoded to RGB ``uint8[H, W, 3]``."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise RawDataError(f"cannot read image {str(path)!r}: {exc}") from exc
    if not decode:
        return np.frombuffer(data, dtype=np.uint8).view(BytesArray)
    from mrecord.vision import Decode

    try:
        image: np.ndarray = Decode()(data)
    except DecodeError as exc:
        raise RawDataError(
            f"{str(path)!r} cannot be decoded as an image ({exc}); remove it, or list the "
            "suffixes to read with extensions=[...]"
        ) from exc
    return image
