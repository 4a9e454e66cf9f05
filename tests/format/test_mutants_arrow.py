"""Tests written for mutants of mrecord/format/arrow_types.py and arrow_columns.py that
survived the suite (docs/RELIABILITY.md, "Mutation testing"). Each asserts something a user
relies on: the field an Arrow type maps to (docs/ARROW.md's table), the Arrow type and
values a column is exported as, or a refusal whose whole message names the column, the type
or row and what to do."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

from mrecord import Block
from mrecord.errors import ConversionError, MissingDependencyError
from mrecord.format.arrow_columns import column_from_arrow, column_to_arrow, field_for_values
from mrecord.format.arrow_types import (
    arrow_schema_for,
    arrow_type_for_field,
    field_spec_for_arrow,
    import_pyarrow,
    schema_for_arrow,
)
from mrecord.format.schema import Field, parse_schema

pa = pytest.importorskip("pyarrow")

_CASTS = (
    "cast it to one of: int8..int64, uint8, uint16, float16..float64, bool, string, binary or "
    "lists of numbers (see docs/ARROW.md)"
)


def _refusal(column: str, type_text: str, why: str = "") -> str:
    """The whole message of a refused Arrow type, as docs/ARROW.md promises it."""
    reason = f" ({why})" if why else ""
    return (
        f"column {column!r} has Arrow type {type_text}, which mrecord cannot store{reason}; "
        + _CASTS
    )


def _refused(column: str, type_: Any) -> str:
    with pytest.raises(ConversionError) as info:
        field_spec_for_arrow(column, type_)
    return str(info.value)


# --- arrow_types: import ------------------------------------------------------------------


def test_missing_pyarrow_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` now fails
    with pytest.raises(MissingDependencyError) as info:
        import_pyarrow()
    assert isinstance(info.value, ImportError)
    assert str(info.value) == (
        "Arrow, Parquet and Hugging Face support needs pyarrow: pip install 'mrecord[arrow]'"
    )


# --- arrow_types: refusals, whole messages ----------------------------------------------------


def test_a_type_without_a_mapping_gets_no_reason_in_parentheses() -> None:
    assert _refused("when", pa.timestamp("ms")) == _refusal("when", "timestamp[ms]")
    assert _refused("when", pa.list_(pa.timestamp("ms"))) == _refusal(
        "when", "list<item: timestamp[ms]>"
    )


@pytest.mark.parametrize(
    "type_",
    [
        pa.uint64(),
        pa.list_(pa.uint64()),
        pa.list_(pa.uint64(), 3),
        pa.dictionary(pa.int8(), pa.uint64()),
        pa.list_(pa.dictionary(pa.int8(), pa.uint64())),
        pa.fixed_shape_tensor(pa.uint64(), [2, 2]),
    ],
)
def test_uint64_anywhere_is_refused_with_the_whole_type_and_what_to_do(type_: Any) -> None:
    """The message names the column and the column's whole type (not the element's)."""
    whole = type_.value_type if isinstance(type_, pa.DictionaryType) else type_
    if isinstance(type_, pa.FixedShapeTensorType):
        whole = pa.uint64()  # the tensor's element type is what is refused
    assert _refused("ids", type_) == _refusal(
        "ids", str(whole), "mrecord's widest integer is int64: cast to int64 if the values fit"
    )


@pytest.mark.parametrize(
    "element",
    ["string", "large_string", "string_view", "binary", "large_binary", "binary_view", "binary3"],
)
def test_lists_of_strings_or_bytes_are_refused_saying_why(element: str) -> None:
    if not hasattr(pa, element.rstrip("3")):
        pytest.skip(f"pyarrow < 16 has no {element}")  # nothing to refuse there
    type_ = pa.list_(pa.binary(3) if element == "binary3" else getattr(pa, element)())
    assert _refused("tags", type_) == _refusal(
        "tags", str(type_), "lists of strings or bytes have no fixed element size"
    )


def test_a_fixed_size_list_of_size_0_is_refused_naming_column_and_type() -> None:
    assert _refused("empty", pa.list_(pa.int8(), 0)) == _refusal(
        "empty", "fixed_size_list<item: int8>[0]", "a fixed-size list of size 0"
    )


class _Unit(pa.ExtensionType):  # type: ignore[misc,name-defined]
    """A user's extension type: float32 storage, a ``value_type`` attribute that is a str
    (a unit label, nothing like Hugging Face's element type), and no shape."""

    def __init__(self) -> None:
        self.value_type = "metres"
        super().__init__(pa.float32(), "test.unit")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: Any, serialized: bytes) -> _Unit:
        return cls()


def test_extension_types_map_to_their_storage_but_not_inside_lists() -> None:
    assert field_spec_for_arrow("dist", _Unit()) == {"type": "float32"}
    type_ = pa.list_(_Unit())
    assert _refused("dists", type_) == _refusal(
        "dists", str(type_), "extension types inside lists are not supported"
    )


def test_extension_of_an_unstorable_type_names_the_column() -> None:
    class Stamp(pa.ExtensionType):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__(pa.uint64(), "test.stamp")

        def __arrow_ext_serialize__(self) -> bytes:
            return b""

        @classmethod
        def __arrow_ext_deserialize__(cls, storage_type: Any, serialized: bytes) -> Any:
            return cls()

    assert _refused("stamp", Stamp()) == _refusal(
        "stamp", "uint64", "mrecord's widest integer is int64: cast to int64 if the values fit"
    )


def test_hugging_face_arrays_of_uint64_name_the_column() -> None:
    datasets = pytest.importorskip("datasets")
    hf_type = (
        datasets.Features({"m": datasets.Array2D((2, 3), "uint64")}).arrow_schema.field("m").type
    )
    assert _refused("m", hf_type) == _refusal(
        "m", "uint64", "mrecord's widest integer is int64: cast to int64 if the values fit"
    )
    ok = datasets.Features({"m": datasets.Array3D((None, 2, 3), "int16")}).arrow_schema
    assert field_spec_for_arrow("m", ok.field("m").type) == {"type": "int16", "shape": [-1, 2, 3]}


def test_structs_and_unions_that_are_not_an_encoded_file_are_refused() -> None:
    """Only ``struct<bytes: binary|large_binary, path: string>`` (HF Image / Audio) is bytes."""
    for type_ in (
        pa.struct([pa.field("bytes", pa.binary()), pa.field("x", pa.int32())]),
        pa.dense_union([pa.field("bytes", pa.binary()), pa.field("path", pa.string())]),
        pa.struct([pa.field("bytes", pa.string()), pa.field("path", pa.string())]),
    ):
        assert _refused("img", type_) == _refusal("img", str(type_))
    for binary in (pa.binary(), pa.large_binary()):
        encoded = pa.struct([pa.field("bytes", binary), pa.field("path", pa.string())])
        assert field_spec_for_arrow("img", encoded) == {"type": "bytes"}


def test_large_binary_image_storage_converts_to_the_embedded_bytes() -> None:
    storage = pa.StructArray.from_arrays(
        [pa.array([b"\x89PNG1", b"\xff\xd8jpeg"], pa.large_binary()), pa.array([None, "b.jpg"])],
        names=["bytes", "path"],
    )
    block = Block.from_arrow(pa.table({"image": storage}))
    assert block.columns["image"] == [b"\x89PNG1", b"\xff\xd8jpeg"]


# --- arrow_types: types that map -------------------------------------------------------------


def test_bool8_maps_to_bool() -> None:
    if not hasattr(pa, "bool8"):
        pytest.skip("pyarrow < 18 has no bool8 extension type")  # nothing to map there
    assert field_spec_for_arrow("flag", pa.bool8()) == {"type": "bool"}
    block = Block.from_arrow(pa.table({"flag": pa.array([1, 0, 2], pa.int8()).cast(pa.bool8())}))
    flags = block.columns["flag"]
    assert isinstance(flags, np.ndarray) and flags.dtype == np.bool_
    assert flags.tolist() == [True, False, True]


def test_dictionary_values_inside_a_list_are_their_numbers() -> None:
    values = pa.DictionaryArray.from_arrays(
        pa.array([0, 1, 1, 0, 1], pa.int8()), pa.array([0.5, 2.5], pa.float32())
    )
    column = pa.ListArray.from_arrays(pa.array([0, 2, 5], pa.int32()), values)
    assert field_spec_for_arrow("w", column.type) == {"type": "float32", "shape": [-1]}
    got = Block.from_arrow(pa.table({"w": column})).columns["w"]
    assert [v.tolist() for v in got] == [[0.5, 2.5], [2.5, 0.5, 2.5]]
    assert all(v.dtype == np.float32 for v in got)


@pytest.mark.parametrize("make", ["list_view", "large_list_view"])
def test_list_views_are_variable_dimensions(make: str) -> None:
    if not hasattr(pa, make):
        pytest.skip(f"pyarrow < 16 has no {make}")  # nothing to map there
    type_ = getattr(pa, make)(pa.int16())
    assert field_spec_for_arrow("v", type_) == {"type": "int16", "shape": [-1]}
    column = pa.array([[1, 2, 3], [], [4]], type_)
    got = Block.from_arrow(pa.table({"v": column})).columns["v"]
    assert [v.tolist() for v in got] == [[1, 2, 3], [], [4]]


# --- arrow_types: schemas ----------------------------------------------------------------------


def test_schema_errors_are_whole_sentences_naming_the_column() -> None:
    with pytest.raises(ConversionError) as info:
        schema_for_arrow(pa.schema([pa.field("a-b", pa.int8())]))
    assert str(info.value) == (
        "Arrow column 'a-b' is not a valid field name (letters, digits and _ only); "
        "rename it in the source"
    )
    with pytest.raises(ConversionError) as info:
        schema_for_arrow(pa.schema([pa.field("a", pa.int8()), pa.field("a", pa.int16())]))
    assert str(info.value) == "Arrow column 'a' appears twice; rename one of them"
    with pytest.raises(ConversionError) as info:
        schema_for_arrow(pa.schema([]))
    assert str(info.value) == "the Arrow table has no columns"


def test_export_types_of_every_shape_kind() -> None:
    fields = parse_schema(
        {
            "a": {"type": "int8", "shape": [-1, 3, -1]},
            "b": {"type": "float16", "shape": [2]},
            "c": {"type": "uint16", "shape": [-1]},
        }
    ).fields
    schema = arrow_schema_for(list(fields))
    assert schema.field("a").type == pa.list_(pa.list_(pa.list_(pa.int8()), 3))
    assert schema.field("b").type == pa.list_(pa.float16(), 2)
    assert schema.field("c").type == pa.list_(pa.uint16())


def test_export_refusals_name_the_field() -> None:
    with pytest.raises(ConversionError) as info:
        arrow_type_for_field(parse_schema({"x": {"type": "int8", "shape": [2, 0]}}).fields[0])
    assert str(info.value) == "field 'x' has shape [2, 0]: Arrow has no fixed-size list of size 0"
    with pytest.raises(ConversionError) as info:
        arrow_type_for_field(Field("x", "complex64"))  # a Field built by hand, not parsed
    assert str(info.value) == "field 'x' has unknown type 'complex64'"


def test_arrow_canonical_extension_types_map_to_their_storage() -> None:
    """docs/ARROW.md: "other extension types: the mapping of their storage type", the ones
    pyarrow implements in C++ (``arrow.uuid``, ``arrow.json``) as much as Python-defined ones."""
    if not hasattr(pa, "uuid") or not hasattr(pa, "json_"):
        pytest.skip("pyarrow < 19 has neither arrow.uuid nor arrow.json")  # nothing to map
    ids = [bytes(range(16)), bytes(range(16, 32))]
    table = pa.table(
        {
            "id": pa.ExtensionArray.from_storage(pa.uuid(), pa.array(ids, pa.binary(16))),
            "doc": pa.array(['{"a": 1}', "[]"], pa.json_()),
        }
    )
    assert schema_for_arrow(table.schema) == {"id": {"type": "bytes"}, "doc": {"type": "string"}}
    block = Block.from_arrow(table)
    assert block.columns == {"id": ids, "doc": ['{"a": 1}', "[]"]}
    type_ = pa.list_(pa.uuid())
    assert _refused("ids", type_) == _refusal(
        "ids", str(type_), "extension types inside lists are not supported"
    )


# --- arrow_columns: Arrow -> mrecord ------------------------------------------------------------

_NULLS = (
    "is null; mrecord has no nulls: fill or drop them first "
    "(pyarrow.compute.fill_null / drop_null, or Dataset.filter)"
)


def _field(spec: dict[str, Any], name: str = "c") -> Field:
    return parse_schema({name: spec}).fields[0]


def _from_arrow_error(arr: Any, spec: dict[str, Any], column: str = "c") -> str:
    with pytest.raises(ConversionError) as info:
        column_from_arrow(column, arr, _field(spec, column))
    return str(info.value)


@pytest.mark.parametrize(
    ("arr", "spec", "place"),
    [
        (pa.array([1, 2, None, 4]), {"type": "int64"}, "row 2"),
        (pa.array(["a", None]), {"type": "string"}, "row 1"),
        (pa.array([b"a", b"b", None]), {"type": "bytes"}, "row 2"),
        (pa.array([[1], None]), {"type": "int64", "shape": [-1]}, "row 1"),
        (
            pa.array([[1], [2], None], pa.list_(pa.int8(), 1)),
            {"type": "int8", "shape": [1]},
            "row 2",
        ),
        (
            pa.array([[1], [None, 3]]),
            {"type": "int64", "shape": [-1]},
            "a list element (element 1)",
        ),
        (
            pa.array([[[1]], [[2], None]]),
            {"type": "int64", "shape": [-1, -1]},
            "a nested list (element 2)",
        ),
        (pa.array([1.0, None]).dictionary_encode(), {"type": "float64"}, "row 1"),
        (pa.array(["x", None]).dictionary_encode(), {"type": "string"}, "row 1"),
    ],
)
def test_nulls_are_refused_naming_column_and_row(
    arr: Any, spec: dict[str, Any], place: str
) -> None:
    assert _from_arrow_error(arr, spec, "col") == f"column 'col': {place} {_NULLS}"


def test_null_tensors_and_extension_values_are_refused_by_row() -> None:
    tensor_type = pa.fixed_shape_tensor(pa.float32(), [2])
    storage = pa.array([[1, 2], None, [3, 4]], pa.list_(pa.float32(), 2))
    tensors = pa.ExtensionArray.from_storage(tensor_type, storage)
    assert (
        _from_arrow_error(tensors, {"type": "float32", "shape": [2]})
        == f"column 'c': row 1 {_NULLS}"
    )
    units = pa.ExtensionArray.from_storage(_Unit(), pa.array([None, 1.0], pa.float32()))
    assert _from_arrow_error(units, {"type": "float32"}) == f"column 'c': row 0 {_NULLS}"


def test_an_image_struct_that_is_null_is_refused_by_row() -> None:
    storage = pa.StructArray.from_arrays(
        [pa.array([b"a", b"b"], pa.binary()), pa.array([None, None], pa.string())],
        names=["bytes", "path"],
        mask=pa.array([False, True]),
    )
    assert (
        _from_arrow_error(storage, {"type": "bytes"}, "image") == f"column 'image': row 1 {_NULLS}"
    )


def test_an_image_with_only_a_path_names_row_and_path_whole() -> None:
    storage = pa.StructArray.from_arrays(
        [pa.array([b"a", b"b", None], pa.binary()), pa.array([None, "x.png", "cat.png"])],
        names=["bytes", "path"],
    )
    assert _from_arrow_error(storage, {"type": "bytes"}, "image") == (
        "column 'image': row 2 has no embedded bytes, only the path 'cat.png'; mrecord reads "
        "no files a dataset names: embed them first (datasets.table.embed_table_storage)"
    )


def test_shape_errors_name_the_column_and_row_whole() -> None:
    assert _from_arrow_error(pa.array([1, 2]), {"type": "int64", "shape": [2]}) == (
        "column 'c' has Arrow type int64, not a list for shape [2]"
    )
    assert _from_arrow_error(pa.array([[1, 2], [3]]), {"type": "int64", "shape": [-1, -1]}) == (
        "column 'c' has 1 list levels, shape [-1, -1] needs 2"
    )
    assert _from_arrow_error(pa.array([[1, 2], [3, 4], [5]]), {"type": "int64", "shape": [2]}) == (
        "column 'c': row 2 has shape (1,), the schema says (2,)"
    )
    ragged = pa.array([[[1, 2], [3, 4]], [], [[1], [2, 3], [4]]])
    assert _from_arrow_error(ragged, {"type": "int64", "shape": [-1, -1]}) == (
        "column 'c': row 2 is ragged (inner lists of lengths 1 and 2); mrecord stores "
        "rectangular arrays: pad the lists or split the column"
    )


def test_chunked_columns_are_read_whole_and_in_order() -> None:
    chunked = pa.chunked_array([pa.array([1, 2], pa.int16()), pa.array([3], pa.int16())])
    got = column_from_arrow("c", chunked, _field({"type": "int16"}))
    assert isinstance(got, np.ndarray) and got.dtype == np.int16 and got.tolist() == [1, 2, 3]
    one = pa.chunked_array([pa.array(["a", "b"])])
    assert column_from_arrow("c", one, _field({"type": "string"})) == ["a", "b"]


def test_values_take_the_field_dtype_and_shape() -> None:
    """uint32 widens to int64; fixed-size lists become one (n, *shape) array; variable
    dimensions one array per row, empty rows keeping their fixed dimensions."""
    got = column_from_arrow("c", pa.array([0, 2**32 - 1], pa.uint32()), _field({"type": "int64"}))
    assert isinstance(got, np.ndarray) and got.dtype == np.int64 and got.tolist() == [0, 2**32 - 1]
    fixed = pa.array(
        [[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]], pa.list_(pa.list_(pa.uint8(), 3), 2)
    )
    got = column_from_arrow("c", fixed, _field({"type": "uint8", "shape": [2, 3]}))
    assert isinstance(got, np.ndarray) and got.dtype == np.uint8 and got.shape == (2, 2, 3)
    assert got.tolist() == fixed.to_pylist()
    var = pa.array(
        [[[1.5, 2.5], [3.5, 4.5]], [], [[5.5, 6.5]]], pa.list_(pa.list_(pa.float32(), 2))
    )
    rows = column_from_arrow("c", var, _field({"type": "float32", "shape": [-1, 2]}))
    assert [(r.shape, r.dtype, r.tolist()) for r in rows] == [
        ((2, 2), np.float32, [[1.5, 2.5], [3.5, 4.5]]),
        ((0, 2), np.float32, []),
        ((1, 2), np.float32, [[5.5, 6.5]]),
    ]
    grid = pa.array([[[1, 2, 3], [4, 5, 6]], [[7], [8]], [], [[9, 10]]])
    rows = column_from_arrow("c", grid, _field({"type": "int32", "shape": [-1, -1]}))
    assert [(r.shape, r.dtype) for r in rows] == [
        ((2, 3), np.int32),
        ((2, 1), np.int32),
        ((0, 0), np.int32),
        ((1, 2), np.int32),
    ]
    assert [r.tolist() for r in rows] == [[[1, 2, 3], [4, 5, 6]], [[7], [8]], [], [[9, 10]]]
    mixed = pa.array([[[1, 2], [3, 4]], [[5], [6]]], pa.list_(pa.list_(pa.int8()), 2))
    rows = column_from_arrow("c", mixed, _field({"type": "int8", "shape": [2, -1]}))
    assert [(r.shape, r.tolist()) for r in rows] == [
        ((2, 2), [[1, 2], [3, 4]]),
        ((2, 1), [[5], [6]]),
    ]


def test_bool8_storage_is_read_as_bools() -> None:
    if not hasattr(pa, "bool8"):
        pytest.skip("pyarrow < 18 has no bool8 extension type")  # nothing to read there
    arr = pa.ExtensionArray.from_storage(pa.bool8(), pa.array([0, 3, 1, 0], pa.int8()))
    got = column_from_arrow("c", arr, _field({"type": "bool"}))
    assert isinstance(got, np.ndarray) and got.dtype == np.bool_
    assert got.tolist() == [False, True, True, False]


# --- arrow_columns: mrecord -> Arrow ------------------------------------------------------------


def test_export_errors_name_the_column_whole() -> None:
    with pytest.raises(ConversionError) as info:
        column_to_arrow("c", [object()])
    assert str(info.value).startswith("column 'c' holds values Arrow cannot represent: ")
    assert isinstance(info.value.__cause__, pa.ArrowInvalid | pa.ArrowTypeError)
    with pytest.raises(ConversionError) as info:
        column_to_arrow("c", np.zeros((2, 3)), _field({"type": "float64", "shape": [2]}))
    assert str(info.value) == "column 'c' has values of shape (3,), the schema says (2,)"
    with pytest.raises(ConversionError) as info:
        column_to_arrow(
            "c", [np.zeros(2), np.zeros((2, 3))], _field({"type": "float64", "shape": [-1]})
        )
    assert str(info.value) == "column 'c': row 1 has 2 dimensions, the schema says 1"


def test_export_types_and_values_of_every_kind() -> None:
    out = column_to_arrow("c", np.array([1, -2], np.int16), _field({"type": "int16"}))
    assert out.type == pa.int16() and out.to_pylist() == [1, -2]
    out = column_to_arrow("c", ["é", "b"], _field({"type": "string"}))
    assert out.type == pa.string() and out.to_pylist() == ["é", "b"]
    blobs = [b"ab", bytearray(b"c"), memoryview(b"de"), np.frombuffer(b"fg", np.uint8)]
    out = column_to_arrow("c", blobs, _field({"type": "bytes"}))
    assert out.type == pa.binary() and out.to_pylist() == [b"ab", b"c", b"de", b"fg"]
    image = np.arange(2 * 3 * 2, dtype=np.uint8).reshape(2, 3, 2)
    out = column_to_arrow("c", image, _field({"type": "uint8", "shape": [3, 2]}))
    assert out.type == pa.list_(pa.list_(pa.uint8(), 2), 3) and out.to_pylist() == image.tolist()
    rows: list[Any] = [
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.zeros((0, 3), np.float32),
        np.ones((1, 3), np.float32),
    ]
    out = column_to_arrow("c", rows, _field({"type": "float32", "shape": [-1, 3]}))
    assert out.type == pa.list_(pa.list_(pa.float32(), 3)) and out.to_pylist() == [
        r.tolist() for r in rows
    ]
    rows = [np.arange(6, dtype=np.int64).reshape(2, 3), np.arange(2, dtype=np.int64).reshape(2, 1)]
    out = column_to_arrow("c", rows, _field({"type": "int64", "shape": [2, -1]}))
    assert out.type == pa.list_(pa.list_(pa.int64()), 2) and out.to_pylist() == [
        r.tolist() for r in rows
    ]
    rows = [np.arange(8, dtype=np.uint16).reshape(2, 2, 2), np.zeros((1, 3, 0), np.uint16)]
    out = column_to_arrow("c", rows, _field({"type": "uint16", "shape": [-1, -1, -1]}))
    assert out.type == pa.list_(pa.list_(pa.list_(pa.uint16())))
    assert out.to_pylist() == [r.tolist() for r in rows]
    out = column_to_arrow("c", [], _field({"type": "int8", "shape": [-1, 2]}))
    assert out.type == pa.list_(pa.list_(pa.int8(), 2)) and len(out) == 0


def test_inferred_fields_for_block_columns() -> None:
    """``Block.to_arrow()`` without a schema: the field each kind of column is given."""

    def spec(values: Any) -> Any:
        f = field_for_values("c", values)
        return None if f is None else (f.type, f.shape)

    assert spec(np.zeros(3, np.float16)) == ("float16", None)
    assert spec(np.zeros((3, 2, 4), np.int8)) == ("int8", (2, 4))
    assert spec(np.zeros((3, 5), np.int8)) == ("int8", (5,))
    assert spec([np.zeros((2, 3)), np.zeros(4)]) == ("float64", (-1, 3))
    assert spec(np.array(["a"])) is None  # a numpy string array: not a numeric field
    assert spec(["a", "b"]) == ("string", None)
    for blob in (b"a", bytearray(b"a"), memoryview(b"a")):
        assert spec([blob]) == ("bytes", None)
    assert spec([np.zeros((2, 3), np.int32), np.zeros((4, 3), np.int32)]) == ("int32", (-1, 3))
    assert spec([np.zeros((2, 3), np.int32), np.zeros((2, 4), np.int32)]) == ("int32", (-1, -1))
    assert spec([np.zeros((2, 0), np.int32), np.zeros((2, 0), np.int32)]) == ("int32", (-1, -1))
    assert spec([np.zeros(2, np.uint8), np.zeros(5, np.uint8)]) == ("uint8", (-1,))
    assert spec([np.zeros((1, 2, 3)), np.zeros((1, 2, 5))]) == ("float64", (-1, 2, -1))
    assert spec([np.array(1.0)]) is None  # 0-d arrays: no axis to vary
    assert spec([np.array(["x"])]) is None
    assert spec([]) is None
    assert spec([1, 2]) is None


def test_tensor_and_dictionary_columns_read_as_their_values() -> None:
    tensors = pa.FixedShapeTensorArray.from_numpy_ndarray(
        np.array([[[1, 2], [3, 4]], [[5, 6], [2**32 - 1, 0]]], np.uint32)
    )
    field = parse_schema(schema_for_arrow(pa.schema([pa.field("t", tensors.type)]))).fields[0]
    assert (field.type, field.shape) == ("int64", (2, 2))  # uint32 widens to int64
    got = column_from_arrow("t", tensors, field)
    assert isinstance(got, np.ndarray) and got.dtype == np.int64 and got.shape == (2, 2, 2)
    assert got.tolist() == [[[1, 2], [3, 4]], [[5, 6], [2**32 - 1, 0]]]
    words = pa.array(["b", "a", "b"]).dictionary_encode()
    assert column_from_arrow("w", words, _field({"type": "string"}, "w")) == ["b", "a", "b"]
    numbers = pa.array([2.5, 1.5, 2.5], pa.float32()).dictionary_encode()
    got = column_from_arrow("n", numbers, _field({"type": "float32"}, "n"))
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    assert got.tolist() == [2.5, 1.5, 2.5]


def test_nested_lists_with_empty_rows_first_last_and_ragged_first_rows() -> None:
    spec = {"type": "int8", "shape": [-1, -1]}
    column = pa.array([[], [[1, 2]], [[3], [4]], []], pa.list_(pa.list_(pa.int8())))
    rows = column_from_arrow("c", column, _field(spec))
    assert [(r.shape, r.tolist()) for r in rows] == [
        ((0, 0), []),
        ((1, 2), [[1, 2]]),
        ((2, 1), [[3], [4]]),
        ((0, 0), []),
    ]
    ragged_first = pa.array([[[1], [2, 3]], [[4]]], pa.list_(pa.list_(pa.int8())))
    assert _from_arrow_error(ragged_first, spec) == (
        "column 'c': row 0 is ragged (inner lists of lengths 1 and 2); mrecord stores "
        "rectangular arrays: pad the lists or split the column"
    )
    # row 0 with one inner list, row 1 with inner lists of another length
    rows = column_from_arrow("c", pa.array([[[1, 2, 3]], [[4], [5]]]), _field(spec))
    assert [(r.shape, r.tolist()) for r in rows] == [((1, 3), [[1, 2, 3]]), ((2, 1), [[4], [5]])]


def test_export_keeps_the_field_type_whatever_the_values_type() -> None:
    """Python numbers, or an array of another dtype, are exported in the field's type."""
    out = column_to_arrow("c", [1, 2], _field({"type": "int8"}))
    assert out.type == pa.int8() and out.to_pylist() == [1, 2]
    out = column_to_arrow("c", np.array([[1.5, 2.5]]), _field({"type": "float32", "shape": [2]}))
    assert out.type == pa.list_(pa.float32(), 2) and out.to_pylist() == [[1.5, 2.5]]
    for spec, type_ in (({"type": "string"}, pa.string()), ({"type": "bytes"}, pa.binary())):
        out = column_to_arrow("c", [], _field(spec))
        assert out.type == type_ and len(out) == 0


def test_export_without_a_schema_infers_fixed_size_lists() -> None:
    out = column_to_arrow("c", np.arange(6, dtype=np.int16).reshape(3, 2))
    assert out.type == pa.list_(pa.int16(), 2) and out.to_pylist() == [[0, 1], [2, 3], [4, 5]]
    rows = [np.zeros((2, 3), np.float32), np.ones((1, 3), np.float32)]
    out = column_to_arrow("c", rows)
    assert out.type == pa.list_(pa.list_(pa.float32(), 3))
    assert out.to_pylist() == [r.tolist() for r in rows]
    with pytest.raises(ConversionError) as info:
        column_to_arrow("c", [np.zeros((2, 3)), np.zeros(4)])  # rows of different ranks
    assert str(info.value) == "column 'c': row 1 has 1 dimensions, the schema says 2"
    out = column_to_arrow("c", [1, 2])  # no field to infer: Arrow's own inference
    assert out.type == pa.int64() and out.to_pylist() == [1, 2]


def test_tables_convert_on_a_pyarrow_without_the_bool8_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ``arrow`` extra allows pyarrow 15, which has no ``Bool8Type`` (pyarrow 18):
    every Arrow column, extension ones included, still maps and converts there (both
    mappings asked ``isinstance(type_, pa.Bool8Type)`` and raised AttributeError)."""
    if hasattr(pa, "Bool8Type"):
        monkeypatch.delattr(pa, "Bool8Type")
    table = pa.table(
        {
            "flag": pa.array([True, False]),
            "shape": pa.FixedShapeTensorArray.from_numpy_ndarray(
                np.arange(8, dtype=np.float32).reshape(2, 2, 2)
            ),
        }
    )
    assert field_spec_for_arrow("flag", table.schema.field("flag").type) == {"type": "bool"}
    got = Block.from_arrow(table).columns
    assert np.asarray(got["flag"]).tolist() == [True, False]
    assert np.asarray(got["shape"]).shape == (2, 2, 2)
