"""Gathering variable-shape arrays (VARARRAY columns) many rows at a time.

One numpy array per value is what the reader hands out (MindSpore's semantics: each row's
value is its own writeable array). Built one row at a time that is a slice, a reshape and
a copy per row, in Python (rates before and after: docs/BENCHMARKS.md, "Issue 14, second
round"). (Pages of which a quarter or more is wanted
are copied whole and handed out as views, in ``DatasetReader``.) Here the wanted rows of
a shard's other uncompressed pages, when a call wants at least ``GROUPED_MIN_ROWS`` of
them, are gathered from the file's memory map by shape
(:func:`mrecord.format.shape_groups.values_by_shape`: one fancy index a shape, values
that do not share memory with each other or with the file).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mrecord.errors import ArgumentError
from mrecord.format.chunks import DecodedVarChunk
from mrecord.format.schema import Field
from mrecord.format.shape_groups import values_by_shape

__all__ = ["GROUPED_MIN_ROWS", "PageRows", "gather_by_shape", "spanning_view"]

GROUPED_MIN_ROWS = 1024
"""Calls for fewer rows of a shard are faster row by row (grouping has a fixed cost)."""

PageRows = tuple[int, DecodedVarChunk, np.ndarray, np.ndarray]
"""(absolute file offset of the chunk, its decoded head, result positions, slots)."""


def gather_by_shape(
    field: Field, file_bytes: np.ndarray, pages: Sequence[PageRows], result: list[Any]
) -> None:
    """Put the values of ``pages``' wanted rows into ``result`` at their positions.

    ``file_bytes`` is the whole shard file as a ``uint8`` array (a view of the map); each
    page's chunk is stored uncompressed at the given offset and has been checksummed.
    """
    starts = np.concatenate(
        [offset + head.data_start + head.offsets_array[slots] for offset, head, _, slots in pages]
    )
    shapes = [np.asarray(head.shapes)[slots] for _, head, _, slots in pages]
    where = np.concatenate([positions for _, _, positions, _ in pages])
    values_by_shape(
        file_bytes, starts, np.concatenate(shapes).astype(np.int64), field.dtype, where, result
    )


def spanning_view(parts: Sequence[np.ndarray]) -> tuple[np.ndarray, list[int]]:
    """One read-only ``uint8`` array over the memory from the lowest of ``parts`` (each a
    contiguous ``uint8`` array, e.g. chunks in the reader's buffers) to the end of the
    highest, and each part's offset in it: values lying in several buffers are then
    gathered with one index a shape (:func:`gather_by_shape`), without laying the parts
    end to end first.

    Laid end to end, a ``Shuffle.BLOCK`` read of variable-shape rows copied every chunk
    its rows touch, its whole window: 7.3 GB an epoch of the bench's 798 MB (2M rows in a
    266 MB group). Between the parts lies memory that is not theirs, possibly not mapped:
    only spans inside a part may be read through the view (``gather_by_shape`` reads the
    values its heads place inside their chunk), and the parts must outlive it (it holds
    the lowest one only)."""
    if not parts:
        return np.empty(0, dtype=np.uint8), []
    for part in parts:
        if part.dtype != np.uint8 or part.ndim != 1 or not part.flags.c_contiguous:
            raise ArgumentError("spanning_view takes contiguous one-dimensional uint8 arrays")
    addresses = [int(part.ctypes.data) for part in parts]
    lowest = min(range(len(parts)), key=addresses.__getitem__)
    base = addresses[lowest]
    end = max(address + len(part) for address, part in zip(addresses, parts, strict=True))
    span = np.lib.stride_tricks.as_strided(
        parts[lowest], shape=(end - base,), strides=(1,), writeable=False
    )
    return span, [address - base for address in addresses]
