"""A variable-shape column as one buffer: the opt-in form of ``DatasetReader.read_ragged``.

The reader hands out a variable-shape column as one numpy array per value (MindSpore's
semantics). A consumer that reads the values in one pass (a scan, a statistics job, a
collate step that packs them again) pays microseconds a value for those arrays; Arrow,
Lance and Hugging Face ``datasets`` hand such a column out as one values buffer and
offsets. :class:`RaggedColumn` is that form: the values one after another in one 1-D
array, where each starts, and each one's shape. Value ``i`` is a view of the buffer.

How the bytes are cut out of a shard's pages (one copy a run of values that lie in the
read's order in the file, else one fancy index a value length): :func:`pack_spans`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mrecord.errors import RowIndexError, WrongTypeError
from mrecord.format.columnize import value_shapes
from mrecord.format.shape_groups import scatter_spans

__all__ = ["RaggedColumn", "pack_spans", "ragged_from_arrays", "runs_in_order"]


@dataclass(frozen=True, eq=False)
class RaggedColumn:
    """``len(shapes)`` variable-shape values in one buffer.

    ``values``: every value's items one after another (1-D, the field's dtype; a new
    array, sharing no memory with the files). ``offsets``: ``int64``, one more than the
    values: value ``i`` is ``values[offsets[i]:offsets[i + 1]]``, shaped ``shapes[i]``
    (``int64``, one row a value). ``column[i]`` is that value, a view of ``values``
    (writing to it writes the buffer); :meth:`arrays` gives them all.
    """

    values: np.ndarray
    offsets: np.ndarray
    shapes: np.ndarray

    def __len__(self) -> int:
        return len(self.shapes)

    def __getitem__(self, index: int) -> np.ndarray:
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise WrongTypeError(f"RaggedColumn indices must be ints, got {index!r}")
        n = len(self)
        i = int(index) + n if index < 0 else int(index)
        if not 0 <= i < n:
            raise RowIndexError(f"value {int(index)} is out of range: the column has {n} values")
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.values[a:b].reshape(tuple(self.shapes[i].tolist()))

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self.arrays())

    def arrays(self) -> list[np.ndarray]:
        """Every value as its own array, each a view of :attr:`values` (what
        ``read_rows`` would give, but sharing this one buffer)."""
        values, starts = self.values, self.offsets.tolist()
        return [
            values[a:b].reshape(shape)
            for a, b, shape in zip(
                starts, starts[1:], map(tuple, self.shapes.tolist()), strict=False
            )
        ]

    @property
    def nbytes(self) -> int:
        """Bytes of the values."""
        return int(self.values.nbytes)


def ragged_from_arrays(
    arrays: Sequence[np.ndarray], dtype: np.dtype[Any], ndim: int
) -> RaggedColumn:
    """A :class:`RaggedColumn` of ``arrays`` (each of ``dtype`` with ``ndim`` dimensions),
    their items copied into one buffer."""
    shapes = value_shapes(arrays, ndim)
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum(np.prod(shapes, axis=1), out=offsets[1:])
    if arrays:
        values = np.concatenate([a.reshape(-1) for a in arrays]).astype(dtype, copy=False)
    else:
        values = np.zeros(0, dtype=dtype)
    return RaggedColumn(values, offsets, shapes)


def pack_spans(
    pieces: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], lengths: np.ndarray
) -> np.ndarray:
    """One new ``uint8`` buffer of ``len(lengths)`` byte spans, span ``i`` of
    ``lengths[i]`` bytes, one after another. Each piece ``(data, where, starts)`` puts
    the spans ``where`` (positions in the answer) from bytes ``starts`` of ``data`` (a
    ``uint8`` array; every span inside it: the caller checks). Every position is in
    exactly one piece.

    A piece whose spans come in the answer's order and lie back to back in ``data``
    (a read in file order: a page's run of values) is one slice copy. Otherwise the
    spans are grouped by length, each group written with one fancy index of windows
    (:func:`~mrecord.format.shape_groups.byte_windows`), long or rare lengths one by one.
    """
    ends = np.cumsum(lengths, dtype=np.int64)
    out_starts = ends - lengths
    total = int(ends[-1]) if len(ends) else 0
    out = np.empty(total, dtype=np.uint8)
    for data, where, starts in pieces:
        if not len(where):
            continue
        sizes = lengths[where]
        dst = out_starts[where]
        size = int(sizes.sum())
        if runs_in_order(dst, sizes) and runs_in_order(starts, sizes):
            a, b = int(starts[0]), int(dst[0])
            out[b : b + size] = data[a : a + size]
            continue
        scatter_spans(out, data, dst, starts, sizes)
    return out


def runs_in_order(starts: np.ndarray, sizes: np.ndarray) -> bool:
    """Whether spans of ``sizes`` bytes at ``starts`` lie back to back, in that order."""
    return bool(np.array_equal(starts[1:], starts[:-1] + sizes[:-1]))
