"""The shapes of a variable-shape chunk are checked exactly: against the field's fixed
dimensions, against 2**62 elements, and against the chunk's offsets.

``_check_shapes`` works column by column with a shortcut for sane shapes; these tests hold
it to the rule written out in Python integers (no overflow, no floats), row by row.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.errors import ChunkFormatError
from mrecord.format.chunks import decode_var, encode_chunk
from mrecord.format.schema import Field, parse_schema

LIMIT = 2**62

DIMS = st.one_of(
    st.integers(0, 70),
    st.sampled_from([2**20, 2**21, 2**31, 2**31 + 1, 2**61, 2**62, 2**62 + 1, 2**63, 2**64 - 1]),
)


def _field(row_shape: list[int], dtype: str) -> Field:
    return parse_schema({"v": {"type": dtype, "shape": row_shape}}).fields[0]


def _expected_problem(
    row_shape: list[int], itemsize: int, shapes: list[list[int]], offsets: list[int]
) -> str | None:
    """What the rule says of these shapes, row by row in Python ints: the first kind of
    problem found over the whole chunk (breaks, then absurd, then disagree), or None."""
    if any(d >= 0 and row[i] != d for row in shapes for i, d in enumerate(row_shape)):
        return "breaks"
    for row in shapes:
        product = 1
        for dim in row:
            if dim > LIMIT:
                return "absurd"
            product *= max(dim, 1)
            if product > LIMIT:
                return "absurd"
    for k, row in enumerate(shapes):
        elements = 1
        for dim in row:
            elements *= dim
        if elements * itemsize != offsets[k + 1] - offsets[k]:
            return "disagree"
    return None


_MESSAGES = {
    "breaks": "has a shape that breaks",
    "absurd": "declares an absurdly large shape",
    "disagree": "has shapes that disagree with its offsets",
}


@given(
    ndim=st.integers(1, 3),
    fixed=st.lists(st.sampled_from([-1, -1, 0, 1, 3]), min_size=3, max_size=3),
    dtype=st.sampled_from(["uint8", "int16", "float32", "float64"]),
    data=st.data(),
)
def test_chunk_shapes_are_checked_as_the_rule_says(
    ndim: int, fixed: list[int], dtype: str, data: st.DataObject
) -> None:
    row_shape = fixed[:ndim]
    if -1 not in row_shape:  # a shape without -1 is a fixed-shape field
        row_shape[-1] = -1
    field = _field(row_shape, dtype)
    itemsize = field.dtype.itemsize
    rows = data.draw(st.integers(0, 12), label="rows")
    shapes = [
        [d if d >= 0 and data.draw(st.booleans()) else data.draw(DIMS) for d in row_shape]
        for _ in range(rows)
    ]
    # Offsets that agree with the shapes where they can (small sizes), else made up; a
    # drawn change to one row's size makes the chunk disagree.
    sizes = []
    for row in shapes:
        elements = int(np.prod([min(d, 1 << 10) for d in row], dtype=object))
        sizes.append(elements * itemsize)
    if rows and data.draw(st.booleans(), label="change a size"):
        k = data.draw(st.integers(0, rows - 1))
        sizes[k] += data.draw(st.sampled_from([-itemsize, itemsize, 1]))
        sizes[k] = max(sizes[k], 0)
    offsets = [0]
    for size in sizes:
        offsets.append(offsets[-1] + size)
    head = np.array(offsets, "<u8").tobytes()
    head += np.array(shapes, "<u8").reshape(-1).tobytes() if rows else b""
    chunk = head + bytes(offsets[-1])
    problem = _expected_problem(row_shape, itemsize, shapes, offsets)
    if problem is None:
        decoded = decode_var(field, chunk, rows)
        assert decoded.shapes_list == [tuple(row) for row in shapes]
    else:
        with pytest.raises(ChunkFormatError, match=_MESSAGES[problem]):
            decode_var(field, chunk, rows)


def test_a_size_past_the_whole_data_region_disagrees_without_wrapping_around() -> None:
    """2**61 float64 elements are 2**64 bytes: in 64-bit arithmetic that is 0, the size
    of an empty value; the check must not take it for one."""
    field = _field([-1], "float64")
    head = np.array([0, 0], "<u8").tobytes() + np.array([2**61], "<u8").tobytes()
    with pytest.raises(ChunkFormatError, match="disagree with its offsets"):
        decode_var(field, head, 1)


def test_written_chunks_pass_the_check() -> None:
    field = _field([-1, 3], "float32")
    values = [np.ones((k, 3), np.float32) for k in (0, 1, 64, 5)]
    decoded = decode_var(field, encode_chunk(field, values), len(values))
    assert decoded.shapes_list == [(0, 3), (1, 3), (64, 3), (5, 3)]
