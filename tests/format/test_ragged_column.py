"""``pack_spans``: byte spans from several buffers packed into one, in the answer's order,
whatever their lengths (empty, rare, long, many alike) and wherever they lie (back to back,
scattered, repeated, overlapping); the answer shares no memory with its sources."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord.format.ragged_column import pack_spans, runs_in_order
from mrecord.format.shape_groups import GROUP_MAX_BYTES


@st.composite
def pieces(draw: st.DrawFn) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], np.ndarray]:
    n = draw(st.integers(0, 120))
    lengths = np.array(
        draw(
            st.lists(
                st.sampled_from([0, 1, 4, 12, 12, 12, 40, GROUP_MAX_BYTES + 8]),
                min_size=n,
                max_size=n,
            )
        ),
        dtype=np.int64,
    )
    positions = np.array(draw(st.permutations(range(n))), dtype=np.int64)
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
    out = []
    for where in np.split(positions, cuts):
        sizes = lengths[where]
        if draw(st.booleans()):  # back to back in the source
            starts = (np.cumsum(sizes) - sizes).astype(np.int64)
            data_len = int(sizes.sum())
        else:  # anywhere in a bigger buffer, maybe overlapping
            data_len = int(sizes.max(initial=0)) + 500
            starts = np.array(
                [draw(st.integers(0, data_len - int(s))) for s in sizes], dtype=np.int64
            )
        data = np.random.default_rng(len(where)).integers(0, 256, data_len, dtype=np.uint8)
        out.append((data, where, starts))
    return out, lengths


@settings(max_examples=150, deadline=None)
@given(case=pieces())
def test_pack_spans_puts_every_span_in_its_place(
    case: tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], np.ndarray],
) -> None:
    parts, lengths = case
    spans: dict[int, bytes] = {}
    for data, where, starts in parts:
        for pos, start in zip(where.tolist(), starts.tolist(), strict=True):
            spans[pos] = data[start : start + int(lengths[pos])].tobytes()
    got = pack_spans(parts, lengths)
    assert got.dtype == np.uint8 and got.size == int(lengths.sum())
    assert got.tobytes() == b"".join(spans[i] for i in range(len(lengths)))
    for data, _, _ in parts:
        assert not np.shares_memory(got, data)


def test_runs_in_order() -> None:
    sizes = np.array([3, 0, 5])
    assert runs_in_order(np.array([10, 13, 13]), sizes)
    assert not runs_in_order(np.array([10, 14, 14]), sizes)
    assert not runs_in_order(np.array([13, 10, 10]), np.array([3, 3, 3]))
    assert runs_in_order(np.array([7]), np.array([2]))
