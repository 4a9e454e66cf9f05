"""What the raw-format parsers share: the ``usage`` argument, folder checks, multi-file gathers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mrecord.errors import ArgumentError, RawDataError, WrongTypeError

__all__ = ["USAGES", "check_dir", "check_usage", "gather"]

USAGES = ("train", "test", "all")


def check_usage(usage: object) -> str:
    """``usage`` as one of ``train``/``test``/``all`` (None means ``all``, as in MindSpore)."""
    if usage is None:
        return "all"
    if not isinstance(usage, str):
        raise WrongTypeError(
            f"Argument usage with value {usage!r} is not of type [<class 'str'>], "
            f"but got {type(usage)}."
        )
    if usage not in USAGES:
        raise ArgumentError(
            f"Input usage is not within the valid set of {list(USAGES)!r}."
            f" Got usage={usage!r}."
        )
    return usage


def check_dir(dataset_dir: object, what: str) -> Path:
    """``dataset_dir`` as a Path to an existing folder."""
    if not isinstance(dataset_dir, (str, Path)):
        raise WrongTypeError(f"dataset_dir must be a path (str), got {dataset_dir!r}")
    root = Path(dataset_dir)
    if not root.is_dir():
        raise RawDataError(
            f"The folder {str(root)!r} does not exist or is not a directory: "
            f"give the folder that holds the {what}"
        )
    return root


def gather(parts: Sequence[np.ndarray], ids: np.ndarray) -> np.ndarray:
    """Rows ``ids`` (global, file after file) of the arrays ``parts``, in ``ids`` order.

    One gather per file touched; a run of consecutive ids in one file is a slice
    (a view of the memory map, copied once by the caller's conversion).
    """
    ids = np.asarray(ids, dtype=np.int64)
    if not len(ids):
        return np.empty((0, *parts[0].shape[1:]), dtype=parts[0].dtype)
    counts = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    starts = np.concatenate([[0], np.cumsum(counts)])
    which = np.searchsorted(starts, ids, side="right") - 1
    if which[0] == which[-1] and (which == which[0]).all():
        part, local = parts[int(which[0])], ids - starts[which[0]]
        if local[-1] - local[0] == len(local) - 1 and (np.diff(local) == 1).all():
            return part[int(local[0]) : int(local[-1]) + 1]
        result: np.ndarray = part[local]
        return result
    out = np.empty((len(ids), *parts[0].shape[1:]), dtype=parts[0].dtype)
    for f in np.unique(which):
        mask = which == f
        out[mask] = parts[int(f)][ids[mask] - starts[f]]
    return out
