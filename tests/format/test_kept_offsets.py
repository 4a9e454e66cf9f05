"""How a parsed chunk head keeps its offsets (``mrecord.format.chunks.kept_offsets``): a
list of ints for a few rows, 4-byte ints for many (8-byte ones past 4 GiB). A random
epoch over small variable-shape rows holds every page's head at once; as lists of Python
ints (36 bytes an offset) 2,000,000 rows of ~420 bytes held 120 MB of heads and a 266 MB
memory group was OOM-killed. Chunks are built here with ``struct``, never by mrecord's
writer."""

from __future__ import annotations

import bisect
import struct
import tracemalloc
from array import array

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.errors import ChunkFormatError
from mrecord.format.chunks import ARRAY_OFFSETS_FROM, decode_var
from mrecord.format.schema import Field

BLOB = Field("blob", "bytes")


def _chunk(sizes: list[int]) -> bytes:
    offsets = [0]
    for size in sizes:
        offsets.append(offsets[-1] + size)
    return struct.pack(f"<{len(offsets)}Q", *offsets) + bytes(offsets[-1])


@given(
    st.integers(1, 3 * ARRAY_OFFSETS_FROM).flatmap(
        lambda n: st.lists(st.integers(0, 50), min_size=n, max_size=n)
    )
)
def test_offsets_read_the_same_whichever_way_they_are_kept(sizes: list[int]) -> None:
    head = decode_var(BLOB, _chunk(sizes), len(sizes))
    want = [0, *np.cumsum(sizes).tolist()]
    assert list(head.offsets) == want and len(head.offsets) == len(want)
    assert isinstance(head.offsets, array if len(sizes) >= ARRAY_OFFSETS_FROM else list)
    assert all(type(head.offsets[i]) is int for i in (0, -1))
    assert head.offsets_array.tolist() == want
    assert bisect.bisect_right(head.offsets, want[-1] // 2) == bisect.bisect_right(
        want, want[-1] // 2
    )


@pytest.mark.parametrize("rows", [5, ARRAY_OFFSETS_FROM, 500])
def test_inconsistent_offsets_are_refused_either_way(rows: int) -> None:
    good = _chunk([3] * rows)
    broken = bytearray(good)
    struct.pack_into("<QQ", broken, 8, 4, 2)  # the second offset after the third
    with pytest.raises(ChunkFormatError, match="inconsistent offsets"):
        decode_var(BLOB, bytes(broken), rows)
    with pytest.raises(ChunkFormatError, match=f"last {3 * rows}, data {3 * rows - 1}"):
        decode_var(BLOB, good[:-1], rows)  # the data one byte short of the last offset


def test_a_head_of_many_rows_keeps_about_four_bytes_an_offset() -> None:
    rows = 20_000
    chunk = _chunk([7] * rows)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        head = decode_var(BLOB, chunk, rows)
        assert head.offsets_array[-1] == 7 * rows  # widened for the caller, not kept
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 6 * rows, f"{held / rows:.1f} bytes an offset"
    with pytest.raises(ValueError):
        head.offsets_array[0] = 1  # read-only: the head's offsets are not to be changed
