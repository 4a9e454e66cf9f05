"""``padded_batch``'s ``pad_column``: every row at the start of its slot, the rest the pad
value, for rows that differ in their first dimension only (one scatter) or in more (row by
row), of mixed dtypes, any rank; a row larger than the pad shape names the first such row."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrecord.errors import PipelineError
from mrecord.pipeline.ops.padded_batch import pad_column


def _reference(rows: list[np.ndarray], target: tuple[int, ...], value: float) -> np.ndarray:
    dtype = np.result_type(*rows)
    out = np.full((len(rows), *target), value, dtype=dtype)
    for i, row in enumerate(rows):
        index: tuple[int | slice, ...] = (i, *(slice(0, d) for d in row.shape))
        out[index] = row
    return out


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[np.ndarray], tuple[int | None, ...] | None]:
    ndim = draw(st.integers(0, 3))
    n = draw(st.integers(1, 30))
    inner_vary = draw(st.booleans())
    inner = [draw(st.integers(0, 4)) for _ in range(max(0, ndim - 1))]
    rng = np.random.default_rng(n)
    rows = []
    for _ in range(n):
        first = [draw(st.integers(0, 6))] if ndim else []
        rest = [draw(st.integers(0, 4)) for _ in inner] if inner_vary else inner
        dtype = draw(st.sampled_from(["float32", "int16", "float64"]))
        rows.append(np.asarray(rng.random((*first, *rest)) * 100).astype(dtype))
    shape = draw(st.one_of(st.none(), st.just(tuple([None] * ndim)), st.just(tuple([8] * ndim))))
    return rows, shape


@settings(max_examples=150, deadline=None)
@given(case=batches(), value=st.sampled_from([0, -1, 7.5]))
def test_pad_column_matches_row_by_row_padding(
    case: tuple[list[np.ndarray], tuple[int | None, ...] | None], value: float
) -> None:
    rows, shape = case
    ndim = rows[0].ndim
    largest = tuple(max(r.shape[d] for r in rows) for d in range(ndim))
    wanted = shape if shape is not None else (None,) * ndim
    target = tuple(largest[d] if want is None else want for d, want in enumerate(wanted))
    got = pad_column(rows, shape, value, name="a", ids=np.arange(len(rows)))
    want = _reference(rows, target, value)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_pad_column_names_the_first_row_too_large() -> None:
    rows = [np.zeros((2, 3)), np.zeros((5, 3)), np.zeros((9, 3))]
    with pytest.raises(
        PipelineError, match=r"'a' row 11 has shape \[5, 3\], larger than .*\[4, 3\]"
    ):
        pad_column(rows, (4, 3), 0, name="a", ids=np.array([10, 11, 12]))
