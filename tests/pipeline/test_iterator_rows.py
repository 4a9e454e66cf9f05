"""Row iterators: each value is what ``to_numpy`` makes of the block's value, built per
column in one step (``row_values``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mrecord import NumpySlicesDataset
from mrecord.pipeline.engine.columns import row_values, to_numpy


def test_row_values_equal_to_numpy_of_each_value() -> None:
    columns: list[np.ndarray | list[Any]] = [
        np.arange(5, dtype=np.int32),
        np.arange(10, dtype=np.float64).reshape(5, 2),
        np.array(["a", "bb", "c", "", "é"]),
        [b"x", b"", b"yz", b"\x00", b"q"],
        [np.ones((k, 3), np.float32) for k in range(5)],
        np.array([b"a", b"b", b"c", b"d", b"e"], dtype=object),
    ]
    for col in columns:
        got = row_values(col)
        assert len(got) == 5
        for i, value in enumerate(got):
            want = to_numpy(col[i])
            assert isinstance(value, np.ndarray)
            assert value.shape == want.shape and value.dtype == want.dtype
            np.testing.assert_array_equal(value, want)


def test_tuple_and_dict_iterators_give_zero_d_arrays_for_scalars() -> None:
    ds = NumpySlicesDataset(
        {"label": np.arange(6, dtype=np.int64), "v": np.arange(12.0).reshape(6, 2)},
        shuffle=False,
    )
    rows = list(ds.create_tuple_iterator(num_epochs=1, output_numpy=True))
    assert [int(r[0]) for r in rows] == list(range(6))
    assert all(r[0].shape == () and r[0].dtype == np.int64 for r in rows)
    assert [r[1].tolist() for r in rows] == np.arange(12.0).reshape(6, 2).tolist()
    dicts = list(ds.create_dict_iterator(num_epochs=1, output_numpy=True))
    assert [sorted(d) for d in dicts] == [["label", "v"]] * 6
    assert [int(d["label"]) for d in dicts] == list(range(6))
