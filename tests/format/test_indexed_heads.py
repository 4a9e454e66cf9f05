"""Many heads parsed from the head index at once (``mrecord.format.indexed_heads``): a
chunk passes exactly when the one-at-a-time rules (``decode_var`` then
``checked_value_crcs``) pass it, with the same offsets and value CRCs, whatever bytes of
its copy are damaged.

The index entries are built here by hand (``struct`` and the ``crc32c`` package), never
by mrecord's writer."""

from __future__ import annotations

import struct

import crc32c
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mrecord.errors import ChunkFormatError
from mrecord.format.chunks import decode_var
from mrecord.format.indexed_heads import parse_heads
from mrecord.format.schema import Field
from mrecord.format.value_crcs import checked_value_crcs

BLOB = Field("blob", "bytes")


def _entry(sizes: list[int], value_crcs: list[int]) -> tuple[bytes, int]:
    """A chunk's value table and head as the index holds them, and its stored length."""
    offsets = [0]
    for size in sizes:
        offsets.append(offsets[-1] + size)
    head = struct.pack(f"<{len(offsets)}Q", *offsets)
    table = struct.pack(f"<{len(sizes) + 1}I", crc32c.crc32c(head), *value_crcs)
    return table + head, len(head) + offsets[-1]


def _one_at_a_time(index: bytes, start: int, rows: int, length: int) -> object:
    table_bytes = 4 * (rows + 1)
    table = index[start : start + table_bytes]
    head = index[start + table_bytes : start + table_bytes + 8 * (rows + 1)]
    try:
        parsed = decode_var(BLOB, head, rows, length)
    except ChunkFormatError:
        return None
    crcs = checked_value_crcs(table, head)
    return None if crcs is None else (parsed.offsets, crcs.tolist())


@st.composite
def _chunks(draw: st.DrawFn) -> tuple[bytes, list[int], int, list[int]]:
    rows = draw(st.integers(1, 12))
    count = draw(st.integers(1, 30))
    index = bytearray(draw(st.binary(max_size=7)))  # entries need not start aligned
    starts, lengths = [], []
    for _ in range(count):
        sizes = draw(st.lists(st.integers(0, 5000), min_size=rows, max_size=rows))
        crcs = draw(st.lists(st.integers(0, 2**32 - 1), min_size=rows, max_size=rows))
        entry, length = _entry(sizes, crcs)
        starts.append(len(index))
        index += entry + draw(st.binary(max_size=9))
        # a stored length that disagrees with the offsets' end: the offsets are wrong
        lengths.append(length + draw(st.sampled_from([0, 0, 0, 1, -1, 8])))
    for _ in range(draw(st.integers(0, 4))):  # damaged bytes anywhere
        at = draw(st.integers(0, len(index) - 1))
        index[at] ^= draw(st.integers(1, 255))
    return bytes(index), starts, rows, lengths


@given(_chunks())
def test_a_chunk_passes_together_exactly_when_it_passes_alone(
    case: tuple[bytes, list[int], int, list[int]],
) -> None:
    index, starts, rows, lengths = case
    together = parse_heads(memoryview(index), starts, rows, lengths)
    assert len(together) == len(starts)
    for got, start, length in zip(together, starts, lengths, strict=True):
        alone = _one_at_a_time(index, start, rows, length)
        if alone is None:
            assert got is None
        else:
            assert got is not None
            offsets, crcs = got
            assert (offsets, crcs.tolist()) == alone
            assert all(type(offset) is int for offset in offsets)  # as the list keeps them
            assert crcs.dtype == np.dtype("<u4")


def test_decreasing_offsets_and_a_wrong_head_crc_are_refused() -> None:
    good, length = _entry([10, 20, 30], [1, 2, 3])
    table = 16
    decreasing = bytearray(good)
    struct.pack_into("<QQQQ", decreasing, table, 0, 20, 10, 60)  # ends right, not sorted
    struct.pack_into("<I", decreasing, 0, crc32c.crc32c(bytes(decreasing[table:])))
    wrong_crc = bytearray(good)
    wrong_crc[0] ^= 1
    index = good + bytes(decreasing) + bytes(wrong_crc)
    got = parse_heads(memoryview(index), [0, len(good), 2 * len(good)], 3, [length] * 3)
    assert got[0] is not None and got[0][0] == [0, 10, 30, 60]
    assert got[0][1].tolist() == [1, 2, 3]
    assert got[1] is None and got[2] is None
