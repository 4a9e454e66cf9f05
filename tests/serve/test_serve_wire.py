"""The binary block format of POST /blocks: what is encoded decodes to the same values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.block import ColumnValues
from mrecord.errors import ArgumentError, DatasetServerError, FormatError
from mrecord.serve.protocol.wire import decode_block, decode_request, encode_block, encode_request

KINDS = {
    "f": ("fixed", "<f4", [2, 3]),
    "i": ("fixed", "<i8", []),
    "b": ("bytes", "|u1", []),
    "s": ("string", "|u1", []),
    "v": ("vararray", "<u2", [-1, 2]),
}


@st.composite
def blocks(draw: st.DrawFn) -> tuple[int, dict[str, object]]:
    n = draw(st.integers(0, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    big = draw(st.booleans())  # big bytes values are copied into one buffer from alloc
    sizes = rng.integers(16 << 10, 40 << 10, n) if big else rng.integers(0, 50, n)
    return n, {
        "f": rng.standard_normal((n, 2, 3)).astype(np.float32),
        "i": rng.integers(-(2**62), 2**62, n),
        "b": [rng.bytes(int(k)) for k in sizes],
        "s": [draw(st.text(max_size=8)) for _ in range(n)],
        "v": [rng.integers(0, 60000, (int(k), 2)).astype(np.uint16) for k in rng.integers(0, 4, n)],
    }


@given(blocks())
def test_a_block_round_trips(case: tuple[int, dict[str, object]]) -> None:
    n, columns = case
    body = b"".join(bytes(memoryview(b)) for b in encode_block(columns, KINDS, n))  # type: ignore[arg-type]
    rows, got = decode_block(bytearray(body))
    assert rows == n and list(got) == list(KINDS)
    np.testing.assert_array_equal(got["f"], columns["f"])
    np.testing.assert_array_equal(got["i"], columns["i"])
    assert [bytes(v) for v in got["b"]] == columns["b"]
    assert all(v.dtype == np.uint8 and not v.flags.writeable for v in got["b"])  # type: ignore[union-attr]
    assert got["s"] == columns["s"]
    for a, b in zip(got["v"], columns["v"], strict=True):  # type: ignore[call-overload]
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_a_request_round_trips_and_is_bounded() -> None:
    ids = np.array([5, 0, 2**40], dtype=np.int64)
    got, cols = decode_request(encode_request(ids, ["a", "b"]), max_ids=10)
    assert got.tolist() == ids.tolist() and cols == ["a", "b"]
    with pytest.raises(ArgumentError, match="at most 2"):
        decode_request(encode_request(ids, None), max_ids=2)


@pytest.mark.parametrize("cut", [0, 3, 10, -1])
def test_a_truncated_or_garbled_block_is_a_remote_error(cut: int) -> None:
    columns: dict[str, ColumnValues] = {
        "i": np.arange(4, dtype=np.int64),
        "b": [b"xy", b"", b"z", b"w"],
    }
    body = b"".join(bytes(memoryview(b)) for b in encode_block(columns, KINDS, 4))
    with pytest.raises(DatasetServerError):
        decode_block(bytearray(body[:cut]))
    with pytest.raises(DatasetServerError):
        decode_block(bytearray(b"\xff\xff\xff\x7f" + body[4:]))


def test_json_values_are_plain_and_finite() -> None:
    from mrecord.serve.server.values import value_json

    arr = np.array([[1.5, np.nan], [np.inf, -2.0]], dtype=np.float32)
    want = {"dtype": "float32", "shape": [2, 2], "data": [[1.5, None], [None, -2.0]]}
    assert value_json(arr) == want
    assert value_json(arr, summary=True)["head"] == [1.5, None, None, -2.0]
    assert value_json(np.float64("nan")) is None and value_json(np.int64(7)) == 7
    assert value_json(np.bool_(True)) is True and value_json("ü") == "ü"
    assert value_json(b"\x00\xff") == {"base64": "AP8="}
    assert value_json(b"\x00\xff", summary=True) == {"bytes": 2}


def test_many_variable_shape_values_round_trip_as_their_own_arrays() -> None:
    """Hundreds of values of a few shapes (decoded a shape at a time), some big (views)."""
    rng = np.random.default_rng(7)
    n = 300
    values = [rng.integers(0, 60000, (int(k), 2)).astype(np.uint16) for k in rng.integers(0, 5, n)]
    values[17] = rng.integers(0, 60000, (3000, 2)).astype(np.uint16)  # 12 KB: sent as a view
    body = b"".join(bytes(memoryview(b)) for b in encode_block({"v": values}, KINDS, n))
    rows, got = decode_block(bytearray(body))
    assert rows == n
    for a, b in zip(got["v"], values, strict=True):  # type: ignore[call-overload]
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    got["v"][0][...] = 1  # type: ignore[index]  # each value is its own writeable array
    np.testing.assert_array_equal(got["v"][1], values[1])  # type: ignore[index]


def test_a_variable_shape_column_whose_shapes_do_not_match_its_bytes_is_a_remote_error() -> None:
    values = [np.ones((2, 2), dtype=np.uint16), np.ones((1, 2), dtype=np.uint16)]
    parts = encode_block({"v": values}, KINDS, 2)
    body = bytearray(b"".join(bytes(memoryview(b)) for b in parts))
    shapes_at = body.index(np.array([[2, 2], [1, 2]], dtype="<i8").tobytes())
    body[shapes_at : shapes_at + 8] = np.array([3], dtype="<i8").tobytes()  # 3x2 in 8 bytes
    with pytest.raises(DatasetServerError, match="do not match"):
        decode_block(body)


def test_a_value_of_the_wrong_rank_is_not_encoded() -> None:
    with pytest.raises(FormatError, match="dimensions"):
        encode_block({"v": [np.ones(3, dtype=np.uint16)]}, KINDS, 1)
