"""Tests written for mutants of mrecord/format/columnize.py that survived the suite
(docs/RELIABILITY.md, "Mutation testing"). ``write_raw_data`` (rows or a dict of columns)
goes through these functions: each test asserts the columns a user's values become, or the
whole ``RowValidationError`` message with its ``row`` and ``field``, at the boundaries."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from mrecord.errors import RowValidationError
from mrecord.format.columnize import columns_from_columns, columns_from_rows
from mrecord.format.schema import parse_schema


def _refusal(spec: dict[str, Any], data: Any) -> tuple[str, int | None, str | None]:
    """The message, row and field of the error ``data`` (rows, or a dict of columns) gets."""
    with pytest.raises(RowValidationError) as info:
        columns_from_rows(parse_schema(spec), data)
    return str(info.value), info.value.row, info.value.field


def _rows(name: str, values: list[Any]) -> list[dict[str, Any]]:
    return [{name: v} for v in values]


# --- the call's shape -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "kind"), [("ab", "str"), (b"ab", "bytes"), (5, "int"), (None, "NoneType")]
)
def test_rows_that_are_not_a_list_are_refused_naming_what_was_given(data: Any, kind: str) -> None:
    assert _refusal({"x": {"type": "int8"}}, data) == (
        f"rows must be a list of dicts (or a dict of columns), got {kind}",
        None,
        None,
    )


def test_a_row_that_is_not_a_dict_is_named() -> None:
    assert _refusal({"x": {"type": "int8"}}, [{"x": 1}, {"x": 2}, [3]]) == (
        "row 2 must be a dict, got list",
        2,
        None,
    )


def test_missing_and_extra_fields_name_row_and_first_field() -> None:
    spec = {"a": {"type": "int8"}, "b": {"type": "int8"}, "c": {"type": "int8"}}
    good = {"a": 1, "b": 2, "c": 3}
    assert _refusal(spec, [good, {"a": 1}]) == ("row 1 lacks field(s) ['b', 'c']", 1, "b")
    # as many keys as the schema, not the same ones: the missing one is named first
    assert _refusal(spec, [good, good, {"a": 1, "b": 2, "z": 3}]) == (
        "row 2 lacks field(s) ['c']",
        2,
        "c",
    )
    assert _refusal(spec, [{**good, "z": 0, "y": 0}]) == (
        "row 0 has field(s) ['y', 'z'] that are not in the schema ['a', 'b', 'c']",
        0,
        "y",
    )


def test_a_dict_of_columns_takes_the_columnar_path_from_both_entry_points() -> None:
    schema = parse_schema({"x": {"type": "int16"}, "s": {"type": "string"}})
    data: Any = {"x": np.array([1, 2], np.int16), "s": ["a", "b"]}  # rows may be a dict
    for got in (columns_from_rows(schema, data), columns_from_columns(schema, data)):
        assert list(got) == ["x", "s"]
        assert got["x"] is data["x"]  # the right dtype already: no copy
        assert got["s"] == ["a", "b"]


def test_columns_that_do_not_match_the_schema_are_named() -> None:
    spec = {"a": {"type": "int8"}, "b": {"type": "int8"}}
    assert _refusal(spec, {"a": [1], "z": [1]}) == (
        "columns do not match the schema: missing ['b'], unknown ['z']",
        None,
        "b",
    )
    assert _refusal(spec, {"a": [1], "b": [2], "z": [1], "y": [0]}) == (
        "columns do not match the schema: missing [], unknown ['y', 'z']",
        None,
        "y",
    )
    assert _refusal(spec, {"a": [1, 2], "b": [1]}) == (
        "columns have different lengths: {'a': 2, 'b': 1}",
        None,
        None,
    )


# --- scalars --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_", "values"),
    [
        ("int64", [2**63 - 1, -(2**63), 0]),
        ("int32", [2**31 - 1, -(2**31), np.int64(5)]),
        ("int8", [127, -128, np.uint8(3)]),
        ("uint8", [0, 255, np.int16(7)]),
        ("uint16", [65535, 0, np.uint64(9)]),
    ],
)
def test_integers_at_their_type_bounds_are_stored_exactly(type_: str, values: list[Any]) -> None:
    got = columns_from_rows(parse_schema({"x": {"type": type_}}), _rows("x", values))["x"]
    assert isinstance(got, np.ndarray) and got.dtype == np.dtype(type_)
    assert got.tolist() == [int(v) for v in values]


@pytest.mark.parametrize(
    ("type_", "value", "problem"),
    [
        (
            "int64",
            2**63,
            "9223372036854775808 is out of range for int64 [-9223372036854775808, "
            "9223372036854775807]",
        ),
        (
            "int64",
            -(2**63) - 1,
            "-9223372036854775809 is out of range for int64 [-9223372036854775808, "
            "9223372036854775807]",
        ),
        (
            "int32",
            2**70,
            "1180591620717411303424 is out of range for int32 [-2147483648, 2147483647]",
        ),
        ("int32", 2**31, "2147483648 is out of range for int32 [-2147483648, 2147483647]"),
        ("int32", -(2**31) - 1, "-2147483649 is out of range for int32 [-2147483648, 2147483647]"),
        ("uint16", 2**64, "18446744073709551616 is out of range for uint16 [0, 65535]"),
        ("uint16", 2**64 - 1, "18446744073709551615 is out of range for uint16 [0, 65535]"),
        ("uint16", 65536, "65536 is out of range for uint16 [0, 65535]"),
        ("uint8", -1, "-1 is out of range for uint8 [0, 255]"),
        ("uint8", np.int64(-3), "-3 is out of range for uint8 [0, 255]"),
        ("int8", True, "expected a number of type int8, got bool True"),
        ("int8", 1.0, "expected a number of type int8, got float 1.0"),
        ("float64", np.bool_(True), "expected a number of type float64, got bool np.True_"),
        ("float64", "1", "expected a number of type float64, got str '1'"),
        ("bool", 1, "expected a number of type bool, got int 1"),
    ],
)
def test_a_bad_number_names_row_field_and_the_value_given(
    type_: str, value: Any, problem: str
) -> None:
    rows = _rows("x", [0 if type_ != "bool" else False] * 3)
    rows.insert(3, {"x": value})
    assert _refusal({"x": {"type": type_}}, rows) == (
        f"row 3, field 'x' ({type_}): {problem}",
        3,
        "x",
    )


def test_floats_take_ints_and_narrow_but_never_overflow_to_inf() -> None:
    schema = parse_schema({"x": {"type": "float16"}})
    got = columns_from_rows(schema, _rows("x", [1, np.int8(3), np.float32(0.5), 65504.0]))["x"]
    assert isinstance(got, np.ndarray) and got.dtype == np.float16
    assert got.tolist() == [1.0, 3.0, 0.5, 65504.0]
    # inf and nan are values of their own: kept, not refused
    got = columns_from_rows(schema, _rows("x", [float("inf"), float("-inf"), float("nan")]))["x"]
    assert isinstance(got, np.ndarray) and np.isinf(got[:2]).all() and np.isnan(got[2])
    assert _refusal({"x": {"type": "float16"}}, _rows("x", [float("inf"), float("nan"), 1e10])) == (
        "row 2, field 'x' (float16): 10000000000.0 is out of range for float16 "
        "(largest is 65504.0)",
        2,
        "x",
    )
    assert _refusal({"x": {"type": "float32"}}, _rows("x", [1.0, 2.0, 10**400])) == (
        f"row 2, field 'x' (float32): 1{'0' * 56}... is out of range for float32",
        2,
        "x",
    )
    got = columns_from_rows(parse_schema({"x": {"type": "float64"}}), _rows("x", [2**53 + 1]))["x"]
    assert isinstance(got, np.ndarray) and got.dtype == np.float64 and got.tolist() == [2.0**53]


def test_bools_are_bools() -> None:
    got = columns_from_rows(
        parse_schema({"x": {"type": "bool"}}), _rows("x", [True, np.bool_(False)])
    )
    assert isinstance(got["x"], np.ndarray) and got["x"].dtype == np.bool_
    assert got["x"].tolist() == [True, False] and got["x"].shape == (2,)


def test_empty_calls_give_empty_columns_of_the_right_type() -> None:
    spec = {
        "i": {"type": "int32"},
        "f": {"type": "float32"},
        "b": {"type": "bool"},
        "a": {"type": "uint8", "shape": [2, 3]},
        "v": {"type": "uint8", "shape": [-1]},
        "s": {"type": "string"},
        "y": {"type": "bytes"},
    }
    got = columns_from_rows(parse_schema(spec), [])
    for name, dtype in (("i", np.int32), ("f", np.float32), ("b", np.bool_)):
        col = got[name]
        assert isinstance(col, np.ndarray) and col.dtype == dtype and col.shape == (0,)
    col = got["a"]
    assert isinstance(col, np.ndarray) and col.dtype == np.uint8 and col.shape == (0, 2, 3)
    assert got["v"] == [] and got["s"] == [] and got["y"] == []


# --- strings and bytes ------------------------------------------------------------------------


def test_strings_must_be_valid_unicode_str() -> None:
    spec = {"s": {"type": "string"}}
    assert _refusal(spec, _rows("s", ["a", "b", b"c"])) == (
        "row 2, field 's' (string): expected str, got bytes b'c'",
        2,
        "s",
    )
    assert _refusal(spec, _rows("s", ["a", "ok \ud800"])) == (
        "row 1, field 's' (string): string 'ok \\ud800' is not valid unicode (surrogates not "
        "allowed)",
        1,
        "s",
    )
    assert columns_from_rows(parse_schema(spec), _rows("s", ["é", ""]))["s"] == ["é", ""]


def test_bytes_like_values_become_bytes_without_changing_the_callers_list() -> None:
    values: list[Any] = [b"a", bytearray(b"bc"), memoryview(b"def"), b""]
    got = columns_from_rows(parse_schema({"b": {"type": "bytes"}}), _rows("b", values))["b"]
    assert got == [b"a", b"bc", b"def", b""] and all(type(v) is bytes for v in got)
    data = {"b": values}
    got = columns_from_columns(parse_schema({"b": {"type": "bytes"}}), data)["b"]
    assert got == [b"a", b"bc", b"def", b""] and all(type(v) is bytes for v in got)
    assert type(values[1]) is bytearray and type(values[2]) is memoryview  # the caller's list


def test_a_value_that_is_not_bytes_is_shown_short() -> None:
    """Values are shown by their repr, cut to 60 characters."""
    spec = {"b": {"type": "bytes"}}
    exactly_60 = "x" * 58  # repr 'xxx...' is 60 characters: shown whole
    assert _refusal(spec, _rows("b", [b"", exactly_60]))[0] == (
        f"row 1, field 'b' (bytes): expected bytes, got str {exactly_60!r}"
    )
    longer = "y" * 59  # a repr of 61: the first 57 characters and "..."
    assert _refusal(spec, _rows("b", [longer]))[0] == (
        f"row 0, field 'b' (bytes): expected bytes, got str '{'y' * 56}..."
    )
    assert _refusal(spec, _rows("b", [None])) == (
        "row 0, field 'b' (bytes): expected bytes, got NoneType None",
        0,
        "b",
    )


# --- arrays, one per row ----------------------------------------------------------------------


def test_fixed_arrays_are_stacked_and_variable_ones_kept() -> None:
    schema = parse_schema(
        {"a": {"type": "int16", "shape": [2]}, "v": {"type": "int16", "shape": [-1, 2]}}
    )
    rows = [
        {"a": np.array([1, 2], np.int16), "v": np.zeros((0, 2), np.int16)},
        {"a": np.array([3, 4], np.int16), "v": np.ones((3, 2), np.int16)},
    ]
    got = columns_from_rows(schema, rows)
    a = got["a"]
    assert isinstance(a, np.ndarray) and a.dtype == np.int16 and a.tolist() == [[1, 2], [3, 4]]
    assert [v.shape for v in got["v"]] == [(0, 2), (3, 2)]
    assert got["v"][1] is rows[1]["v"]


@pytest.mark.parametrize(
    ("spec", "value", "problem"),
    [
        (
            {"type": "float64", "shape": [2]},
            [1.0, 2.0],
            "expected a numpy array, got list [1.0, 2.0]",
        ),
        (
            {"type": "float64", "shape": [2]},
            np.zeros(2, np.float32),
            "array has dtype float32, expected float64; convert it explicitly with "
            ".astype(np.float64)",
        ),
        ({"type": "float64", "shape": [2]}, np.zeros(3), "array has shape [3], expected [2]"),
        (
            {"type": "float64", "shape": [2]},
            np.zeros((1, 2)),
            "array has shape [1, 2], expected [2]",
        ),
        (
            {"type": "float64", "shape": [-1, 2]},
            np.zeros((3, 3)),
            "array has shape [3, 3], expected [-1, 2]",
        ),
        (
            {"type": "float64", "shape": [-1, 2]},
            np.zeros(2),
            "array has shape [2], expected [-1, 2]",
        ),
        (
            {"type": "float64", "shape": [2, -1]},
            np.zeros((3, 1)),
            "array has shape [3, 1], expected [2, -1]",
        ),
    ],
)
def test_a_bad_array_names_row_field_shape_and_what_to_do(
    spec: dict[str, Any], value: Any, problem: str
) -> None:
    good = np.zeros([2 if d == -1 else d for d in spec["shape"]])
    rows = _rows("x", [good, good, value])
    shape = spec["shape"]
    assert _refusal({"x": spec}, rows) == (
        f"row 2, field 'x' ({spec['type']}, shape {shape}): {problem}",
        2,
        "x",
    )


# --- whole columns (the fast path) ------------------------------------------------------------


def test_a_column_array_of_the_right_dtype_is_taken_as_is() -> None:
    schema = parse_schema({"img": {"type": "uint8", "shape": [2, 2]}})
    data = {"img": np.arange(12, dtype=np.uint8).reshape(3, 2, 2)}
    assert columns_from_columns(schema, data)["img"] is data["img"]


def test_scalar_columns_widen_within_their_kind_and_check_the_range() -> None:
    def column(type_: str, values: np.ndarray) -> Any:
        return columns_from_columns(parse_schema({"x": {"type": type_}}), {"x": values})["x"]

    got = column("int16", np.array([-5, 300], np.int64))
    assert got.dtype == np.int16 and got.tolist() == [-5, 300]
    got = column("int16", np.array([7], np.uint8))
    assert got.dtype == np.int16 and got.tolist() == [7]
    got = column("float32", np.array([1, 2], np.uint8))
    assert got.dtype == np.float32 and got.tolist() == [1.0, 2.0]
    got = column("float32", np.array([0.5], np.float64))
    assert got.dtype == np.float32 and got.tolist() == [0.5]
    got = column("float64", np.array([1.5], np.float16))
    assert got.dtype == np.float64 and got.tolist() == [1.5]
    got = column("int8", np.zeros(0, np.int64))
    assert got.dtype == np.int8 and got.shape == (0,)
    got = column("float16", np.zeros(0, np.float64))
    assert got.dtype == np.float16 and got.shape == (0,)


@pytest.mark.parametrize(
    ("type_", "values", "row", "problem"),
    [
        ("int16", np.array([1, 2, 40000]), 2, "40000 is out of range for int16 [-32768, 32767]"),
        ("int16", np.array([1, -32769, 2]), 1, "-32769 is out of range for int16 [-32768, 32767]"),
        ("uint8", np.array([0, 255, 256], np.uint16), 2, "256 is out of range for uint8 [0, 255]"),
        ("uint8", np.array([3, -1], np.int8), 1, "-1 is out of range for uint8 [0, 255]"),
        (
            "float16",
            np.array([1, 2, 1e6]),
            2,
            "1000000.0 is out of range for float16 (largest is 65504.0)",
        ),
        (
            "int16",
            np.array([1.0]),
            0,
            "column has dtype float64, expected int16; convert it explicitly with "
            ".astype(np.int16)",
        ),
        (
            "bool",
            np.array([1, 0]),
            0,
            "column has dtype int64, expected bool; convert it explicitly with .astype(np.bool)",
        ),
        (
            "float32",
            np.array([True]),
            0,
            "column has dtype bool, expected float32; convert it explicitly with "
            ".astype(np.float32)",
        ),
        (
            "int8",
            np.array([True]),
            0,
            "column has dtype bool, expected int8; convert it explicitly with .astype(np.int8)",
        ),
        (
            "float32",
            np.array([1j]),
            0,
            "column has dtype complex128, expected float32; convert it explicitly with "
            ".astype(np.float32)",
        ),
    ],
)
def test_a_bad_scalar_column_names_the_row_or_the_cast_to_make(
    type_: str, values: np.ndarray, row: int, problem: str
) -> None:
    assert _refusal({"x": {"type": type_}}, {"x": values}) == (
        f"row {row}, field 'x' ({type_}): {problem}",
        row,
        "x",
    )


def test_array_columns_are_never_cast() -> None:
    spec = {"v": {"type": "float64", "shape": [2]}}
    assert _refusal(spec, {"v": np.zeros((3, 2), np.int8)}) == (
        "row 0, field 'v' (float64, shape [2]): column has dtype int8, expected float64; "
        "convert it explicitly with .astype(np.float64)",
        0,
        "v",
    )
    assert _refusal(spec, {"v": np.zeros((3, 3))}) == (
        "row 0, field 'v' (float64, shape [2]): column has shape (3, 3), expected (3, 2)",
        0,
        "v",
    )


def test_object_arrays_and_lists_as_columns_are_checked_value_by_value() -> None:
    schema = parse_schema({"x": {"type": "int8"}, "a": {"type": "int8", "shape": [2]}})
    data = {
        "x": np.array([1, 2], dtype=object),
        "a": [np.array([1, 2], np.int8), np.array([3, 4], np.int8)],
    }
    got = columns_from_columns(schema, data)
    x, a = got["x"], got["a"]
    assert isinstance(x, np.ndarray) and x.dtype == np.int8 and x.tolist() == [1, 2]
    assert isinstance(a, np.ndarray) and a.dtype == np.int8 and a.tolist() == [[1, 2], [3, 4]]
    with pytest.raises(RowValidationError) as info:
        columns_from_columns(schema, {**data, "x": np.array([1, "2"], dtype=object)})
    assert (str(info.value), info.value.row, info.value.field) == (
        "row 1, field 'x' (int8): expected a number of type int8, got str '2'",
        1,
        "x",
    )


@pytest.mark.parametrize(
    ("type_", "values", "row", "problem"),
    [
        ("uint16", [1, 70000, 2**64], 1, "70000 is out of range for uint16 [0, 65535]"),
        (
            "int32",
            [2**31, 2**70],
            0,
            "2147483648 is out of range for int32 [-2147483648, 2147483647]",
        ),
        (
            "int32",
            [-(2**31), 2**31 - 1, 2**70],
            2,
            f"{2**70} is out of range for int32 [-2147483648, 2147483647]",
        ),
        (
            "int64",
            [2**63 - 1, -(2**63), -(2**63) - 1],
            2,
            f"{-(2**63) - 1} is out of range for int64 [{-(2**63)}, {2**63 - 1}]",
        ),
        ("uint8", [255, 0, 2**64], 2, f"{2**64} is out of range for uint8 [0, 255]"),
    ],
)
def test_the_first_integer_out_of_range_is_named_even_beyond_64_bits(
    type_: str, values: list[int], row: int, problem: str
) -> None:
    """A value beyond 64 bits later in the call does not hide an earlier one that is merely
    out of the field's range, and every such message gives the range."""
    assert _refusal({"x": {"type": type_}}, _rows("x", values)) == (
        f"row {row}, field 'x' ({type_}): {problem}",
        row,
        "x",
    )


def test_a_float_too_large_for_its_field_is_refused_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "overflow encountered in cast" would be one
        with pytest.raises(RowValidationError) as info:
            columns_from_rows(parse_schema({"x": {"type": "float16"}}), _rows("x", [1.0, 1e10]))
        assert info.value.row == 1
        with pytest.raises(RowValidationError) as info:
            columns_from_columns(parse_schema({"x": {"type": "float16"}}), {"x": np.array([1e10])})
        assert info.value.row == 0
