"""Tests written for mutants of mrecord/format/ that survived the suite (docs/RELIABILITY.md,
"Mutation testing"). Each asserts something a user relies on: the bytes of the file format,
a refusal with a typed error that says what is wrong, or a value read back."""

from __future__ import annotations

import json
import struct
from typing import Any

import msgpack
import numpy as np
import pytest
import zstandard

from mrecord.errors import (
    ChunkFormatError,
    DecompressionError,
    LayoutError,
    MetadataError,
    SchemaError,
)
from mrecord.format import features
from mrecord.format.chunks import (
    _absurd_shapes,
    decode_fixed,
    decode_var,
    encode_chunk,
    value_nbytes,
)
from mrecord.format.compression import CODEC_IDS, checksum, checksum_update, compress, decompress
from mrecord.format.head_index import HeadIndexEntry
from mrecord.format.layout import (
    FORMAT_MAJOR,
    FORMAT_MINOR,
    HEADER_MAGIC,
    HEADER_SIZE,
    TRAILER_MAGIC,
    TRAILER_SIZE,
    Trailer,
    align,
    describe_foreign,
    encode_header,
    parse_header,
)
from mrecord.format.metadata import CHUNK_DTYPE, ShardMetadata, check_basename
from mrecord.format.page import encode_page
from mrecord.format.schema import NUMERIC_TYPES, Field, FieldKind, Schema, parse_schema

# --- layout -------------------------------------------------------------------------------


def test_header_bytes_are_the_documented_ones() -> None:
    """Other readers find magic, major and minor at fixed little-endian offsets."""
    header = encode_header()
    assert header == HEADER_MAGIC + struct.pack("<HH", FORMAT_MAJOR, FORMAT_MINOR) + bytes(52)
    assert parse_header(header) == (FORMAT_MAJOR, FORMAT_MINOR)


def test_header_of_exactly_64_bytes_parses_and_shorter_is_refused_with_its_length() -> None:
    assert parse_header(encode_header()[:HEADER_SIZE]) == (FORMAT_MAJOR, FORMAT_MINOR)
    with pytest.raises(LayoutError, match="file is 63 bytes, shorter than the 64-byte header"):
        parse_header(encode_header()[:63])


def test_header_errors_say_what_is_wrong() -> None:
    with pytest.raises(LayoutError, match=r"not an mrecord file: header magic is b'PAR1"):
        parse_header(b"PAR1" + bytes(60))
    future = HEADER_MAGIC + struct.pack("<HH", FORMAT_MAJOR + 1, 0) + bytes(52)
    with pytest.raises(LayoutError, match=rf"format version {FORMAT_MAJOR + 1}\.0 .*upgrade"):
        parse_header(future)


def test_trailer_bytes_are_the_documented_ones() -> None:
    encoded = Trailer(100, 20, 0xDEADBEEF).encode()
    assert encoded == struct.pack("<QQI4x", 100, 20, 0xDEADBEEF) + TRAILER_MAGIC
    assert Trailer.parse(encoded, 100 + 20 + TRAILER_SIZE) == Trailer(100, 20, 0xDEADBEEF)


def test_trailer_may_point_right_after_the_header() -> None:
    """A shard without pages has its metadata at offset 64."""
    encoded = Trailer(HEADER_SIZE, 10, 1).encode()
    assert Trailer.parse(encoded, HEADER_SIZE + 10 + TRAILER_SIZE).metadata_offset == HEADER_SIZE


def test_trailer_errors_say_what_is_wrong() -> None:
    with pytest.raises(LayoutError, match="trailer must be 32 bytes, got 31"):
        Trailer.parse(bytes(31), 1000)
    with pytest.raises(LayoutError, match=r"trailer magic is .*truncated or was not committed"):
        Trailer.parse(bytes(32), 1000)
    good = Trailer(100, 20, 1).encode()
    with pytest.raises(LayoutError, match=r"metadata 100\.\.120, outside the file \(1000 bytes\)"):
        Trailer.parse(good, 1000)
    with pytest.raises(LayoutError, match=r"metadata 10\.\.30, outside the file \(62 bytes\)"):
        Trailer.parse(Trailer(10, 20, 1).encode(), 10 + 20 + TRAILER_SIZE)


def test_align_rounds_up_to_64() -> None:
    assert [align(x) for x in (0, 1, 63, 64, 65, 128)] == [0, 64, 64, 64, 128, 128]
    assert isinstance(align(65), int)


def test_foreign_files_are_named_and_mrecord_ones_are_not() -> None:
    assert describe_foreign(b"\x89PNG\r\n\x1a\n" + bytes(56)) == (
        "starts with b'\\x89PNG\\r\\n\\x1a\\n': a PNG image"
    )
    assert describe_foreign(b"abcdefghij") == "starts with b'abcdefgh'"
    # a damaged header but mrecord's trailer magic: may still be a shard
    assert describe_foreign(b"garbage!" * 8, TRAILER_MAGIC) is None
    assert describe_foreign(b"garbage!" * 8, b"12345678") == "starts with b'garbage!'"


def test_a_mindrecord_file_is_recognised_only_by_its_json_header() -> None:
    mindrecord = b"\x00" * 8 + b'{"header_size": 32768, "page_size": 33554432}'
    mindrecord += bytes(64 - len(mindrecord))
    assert describe_foreign(mindrecord) == (
        "starts with b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00': "
        "a MindRecord file: mrecord convert mindrecord SRC DST"
    )
    no_key = b"\x00" * 8 + b'{"page_size": 1}' + bytes(40)
    assert describe_foreign(no_key) == "starts with b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00'"
    no_brace = b"\x00" * 9 + b'"header_size"' + bytes(42)
    assert "MindRecord" not in (describe_foreign(no_brace) or "")
    # the key must lie in the first 64 bytes: a key straddling byte 64 does not count
    late = b"\x00" * 8 + b"{" + b" " * 43 + b'"header_size"'
    assert len(late) == 65
    assert "MindRecord" not in (describe_foreign(late) or "")
    # the brace is byte 8 exactly: a '{' at byte 9 does not count
    shifted = b"\x00" * 9 + b'{"header_size": 1}' + bytes(37)
    assert "MindRecord" not in (describe_foreign(shifted) or "")


# --- compression --------------------------------------------------------------------------


def test_checksum_is_crc32c_and_can_be_computed_in_parts() -> None:
    assert checksum(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert checksum_update(b"56789", checksum(b"1234")) == 0xE3069283
    assert checksum_update(b"", 7) == 7


def test_compress_keeps_raw_bytes_when_asked_for_none_or_when_empty_or_incompressible() -> None:
    raw = b"a" * 1000
    assert compress(raw, "none") == (CODEC_IDS["none"], raw)
    assert compress(b"", "zstd") == (CODEC_IDS["none"], b"")
    noise = np.random.default_rng(0).bytes(1000)
    assert compress(noise, "zstd") == (CODEC_IDS["none"], noise)


def test_compress_writes_one_zstd_frame_with_its_size_at_the_given_level() -> None:
    raw = bytes(range(256)) * 64
    codec, stored = compress(raw, "zstd", 1)
    assert codec == CODEC_IDS["zstd"] == 1
    assert zstandard.frame_content_size(stored) == len(raw)  # decompress relies on it
    assert stored == zstandard.ZstdCompressor(level=1, write_content_size=True).compress(raw)
    assert compress(raw, "zstd", 19)[1] == zstandard.ZstdCompressor(level=19).compress(raw)


def test_compress_keeps_raw_bytes_when_zstd_gains_nothing() -> None:
    """A frame exactly as long as the raw bytes is not worth a decompression."""
    raw = np.random.default_rng(1).bytes(200)
    packed = zstandard.ZstdCompressor(level=3, write_content_size=True).compress(raw)
    assert len(packed) > len(raw)
    # find a raw length where the frame is exactly as long: compressible prefix + noise
    for n in range(1, 200):
        candidate = bytes(n) + raw
        frame = zstandard.ZstdCompressor(level=3, write_content_size=True).compress(candidate)
        if len(frame) == len(candidate):
            assert compress(candidate, "zstd") == (CODEC_IDS["none"], candidate)
            return
    pytest.fail("no input with an equally long zstd frame found")


def test_decompress_returns_exactly_the_recorded_bytes() -> None:
    raw = b"xyz" * 1000
    _, stored = compress(raw, "zstd")
    assert bytes(decompress(stored, 1, len(raw), len(raw))) == raw  # limit == length is fine
    assert decompress(b"abc", 0, 3, 0) == b"abc"


def test_decompress_errors_say_what_is_wrong() -> None:
    raw = b"xyz" * 1000
    _, stored = compress(raw, "zstd")
    with pytest.raises(DecompressionError, match="stored 3 bytes but raw length is 4"):
        decompress(b"abc", 0, 4, 100)
    with pytest.raises(DecompressionError, match="unknown codec id 7"):
        decompress(stored, 7, len(raw), 10**9)
    with pytest.raises(DecompressionError, match="raw length 3000 exceeds the limit of 2999"):
        decompress(stored, 1, len(raw), len(raw) - 1)
    with pytest.raises(DecompressionError, match="not a zstd frame"):
        decompress(b"not zstd at all", 1, 3000, 10**9)
    with pytest.raises(DecompressionError, match="zstd frame declares 3000 bytes, metadata says 2"):
        decompress(stored, 1, 2, 10**9)
    damaged = stored[:-4] + bytes(4)
    with pytest.raises(DecompressionError, match="zstd decompression failed"):
        decompress(damaged, 1, len(raw), 10**9)


# --- page ---------------------------------------------------------------------------------


def test_encode_page_records_lengths_checksums_and_codecs_of_what_is_stored() -> None:
    schema = parse_schema(
        {
            "a": {"type": "int32"},
            "b": {"type": "bytes", "compression": "zstd"},
            "c": {"type": "string"},
        }
    )
    blobs = [b"x" * 500, b"y" * 500, b"", b"z" * 10]
    columns: dict[str, Any] = {
        "a": np.arange(4, dtype=np.int32),
        "b": blobs,
        "c": ["one", "two", "", "four"],
    }
    a, b, c = encode_page(schema, columns, level=1)
    assert a.stored == np.arange(4, dtype="<i4").tobytes()
    assert (a.length, a.raw_length, a.codec, a.crc32) == (16, 16, 0, checksum(a.stored))
    assert b.codec == CODEC_IDS["zstd"]
    raw_b = np.array([0, 500, 1000, 1000, 1010], dtype="<u8").tobytes() + b"".join(blobs)
    assert b.stored == zstandard.ZstdCompressor(level=1, write_content_size=True).compress(raw_b)
    assert (b.length, b.raw_length, b.crc32) == (len(b.stored), len(raw_b), checksum(b.stored))
    offsets = np.frombuffer(c.stored[:40], dtype="<u8").tolist()
    assert offsets == [0, 3, 6, 6, 10]
    assert c.stored[40:] == b"onetwofour"
    assert (c.length, c.raw_length, c.codec, c.crc32) == (50, 50, 0, checksum(c.stored))
    assert len(c.parts) == 2  # small values: the offsets, then the values joined


def test_encode_page_never_copies_large_values_and_joins_small_ones() -> None:
    """A value of more than ``JOIN_VALUES_BELOW`` bytes on average is its own buffer (the
    writer's copy into its page is its only one); smaller values come as one buffer."""
    from mrecord.format.chunks import JOIN_VALUES_BELOW

    schema = parse_schema({"big": {"type": "bytes"}, "small": {"type": "bytes"}})
    big = [bytes([i]) * (JOIN_VALUES_BELOW + 1) for i in range(3)]
    small = [bytes([i]) * JOIN_VALUES_BELOW for i in range(3)]
    a, b = encode_page(schema, {"big": big, "small": small})
    assert len(a.parts) == 4 and all(p is v for p, v in zip(a.parts[1:], big, strict=True))
    assert len(b.parts) == 2 and b.parts[1] == b"".join(small)
    for chunk, values in ((a, big), (b, small)):
        assert chunk.stored[32:] == b"".join(values)
        assert chunk.crc32 == checksum(chunk.stored)
        table = np.frombuffer(chunk.value_crcs or b"", dtype="<u4")
        assert table[1:].tolist() == [checksum(v) for v in values]


def test_encode_page_default_level_is_three() -> None:
    schema = parse_schema({"b": {"type": "bytes", "compression": "zstd"}})
    # 4-bit noise: zstd levels 3 and 4 give different frames for it
    values = [
        np.random.default_rng(i).integers(0, 16, 1000, dtype=np.uint8).tobytes() for i in range(4)
    ]
    raw = np.arange(0, 5001, 1000, dtype="<u8")[:5].tobytes() + b"".join(values)
    (chunk,) = encode_page(schema, {"b": values})
    assert chunk.stored == zstandard.ZstdCompressor(level=3).compress(raw)
    assert chunk.stored != zstandard.ZstdCompressor(level=4).compress(raw)


# --- features -----------------------------------------------------------------------------


def test_features_are_read_from_a_json_description() -> None:
    desc = json.dumps(
        {
            "features": {
                "label": {"class_names": ["cat", "dog"]},
                "image": {"image": True},
                "other": {"image": 1, "class_names": ["a", 2]},
                "junk": "not a dict",
            },
            "note": "kept",
        }
    )
    assert features.class_names(desc) == {"label": ["cat", "dog"]}
    assert features.image_columns(desc) == ["image"]
    for nothing in (None, "", "free text", "[1, 2]", '{"features": [1]}', '{"x": 1}'):
        assert features.class_names(nothing) == {}
        assert features.image_columns(nothing) == []


def test_describe_round_trips_through_the_readers() -> None:
    desc = features.describe(
        {"note": "kept"}, class_names={"label": ["cat", "2"]}, images=["image", "label"]
    )
    assert json.loads(desc) == {
        "note": "kept",
        "features": {
            "label": {"class_names": ["cat", "2"], "image": True},
            "image": {"image": True},
        },
    }
    assert features.class_names(desc) == {"label": ["cat", "2"]}
    assert features.image_columns(desc) == ["label", "image"]
    assert json.loads(features.describe({"note": "kept"})) == {"note": "kept"}


# --- chunks -------------------------------------------------------------------------------


def _field(name: str, spec: dict[str, Any]) -> Field:
    return parse_schema({name: spec}).fields[0]


@pytest.mark.parametrize(
    ("spec", "values"),
    [
        ({"type": "int16", "shape": [2, 3]}, [np.full((2, 3), i, np.int16) for i in range(3)]),
        ({"type": "float64"}, [1.5, 2.5]),
        ({"type": "bytes"}, [b"", b"abc", bytearray(b"xy")]),
        ({"type": "string"}, ["", "ascii", "again"]),
        ({"type": "float32", "shape": [-1, 2]}, [np.ones((k, 2), np.float32) for k in (0, 1, 3)]),
        ({"type": "uint8", "shape": [-1, -1, 3]}, [np.zeros((2, k, 3), np.uint8) for k in (1, 4)]),
    ],
)
def test_value_nbytes_is_what_each_value_adds_to_its_chunk(
    spec: dict[str, Any], values: list[Any]
) -> None:
    """Pages are cut from these estimates: for ASCII they are the exact encoded sizes."""
    f = _field("v", spec)
    sizes = value_nbytes(f, values if f.kind is not FieldKind.FIXED else np.asarray(values))
    assert sizes.dtype == np.int64
    head = 0 if f.kind is FieldKind.FIXED else 8  # the leading offset 0
    assert int(sizes.sum()) + head == len(encode_chunk(f, values))
    for i, value in enumerate(values):
        assert int(sizes[i]) + head == len(encode_chunk(f, [value]))


def test_fixed_chunks_decode_to_the_values_and_wrong_sizes_are_refused() -> None:
    f = _field("img", {"type": "uint16", "shape": [2, 2]})
    values = np.arange(12, dtype="<u2").reshape(3, 2, 2)
    chunk = encode_chunk(f, values)
    assert chunk == values.tobytes()
    np.testing.assert_array_equal(decode_fixed(f, chunk, 3), values)
    assert decode_fixed(f, encode_chunk(f, values[:0]), 0).shape == (0, 2, 2)
    with pytest.raises(
        ChunkFormatError,
        match=r"fixed chunk of field 'img' has 22 bytes, expected 24 for 3 rows of 8 bytes",
    ):
        decode_fixed(f, chunk[:-2], 3)


def test_bool_chunks_hold_only_zero_and_one() -> None:
    f = _field("flag", {"type": "bool"})
    np.testing.assert_array_equal(decode_fixed(f, b"\x00\x01\x01", 3), [False, True, True])
    with pytest.raises(ChunkFormatError, match="bool chunk of field 'flag' holds a byte other"):
        decode_fixed(f, b"\x00\x02", 2)
    assert decode_fixed(f, b"", 0).shape == (0,)
    g = _field("n", {"type": "uint8"})
    assert decode_fixed(g, b"\x07", 1).tolist() == [7]  # only bool is checked


def test_var_chunks_decode_and_inconsistent_heads_are_refused() -> None:
    f = _field("s", {"type": "string"})
    chunk = encode_chunk(f, ["ab", "", "cde"])
    decoded = decode_var(f, chunk, 3)
    assert decoded.offsets == [0, 2, 2, 5]
    assert decoded.shapes is None and decoded.shapes_list == []
    assert decoded.data_start == 32
    assert decoded.offsets_array.dtype == np.int64
    assert decoded.offsets_array.tolist() == [0, 2, 2, 5]
    with pytest.raises(
        ChunkFormatError,
        match=r"chunk of field 's' has 31 bytes, too short for the 32-byte head of 3 rows",
    ):
        decode_var(f, chunk[:31], 3)
    bad_last = np.array([0, 2, 2, 6], "<u8").tobytes() + b"abcde"
    with pytest.raises(
        ChunkFormatError,
        match=r"field 's' has inconsistent offsets \(first 0, last 6, data 5 bytes\)",
    ):
        decode_var(f, bad_last, 3)
    bad_first = np.array([1, 2, 2, 5], "<u8").tobytes() + b"abcde"
    with pytest.raises(ChunkFormatError, match=r"inconsistent offsets \(first 1, last 5"):
        decode_var(f, bad_first, 3)
    decreasing = np.array([0, 3, 2, 5], "<u8").tobytes() + b"abcde"
    with pytest.raises(ChunkFormatError, match="inconsistent offsets"):
        decode_var(f, decreasing, 3)
    # a head of exactly the right size, no data: fine
    assert decode_var(f, np.zeros(4, "<u8").tobytes(), 3).offsets == [0, 0, 0, 0]


def test_vararray_chunks_decode_their_shapes_and_refuse_wrong_ones() -> None:
    f = _field("boxes", {"type": "float32", "shape": [-1, 2]})
    values = [np.ones((k, 2), np.float32) for k in (1, 0, 3)]
    chunk = encode_chunk(f, values)
    decoded = decode_var(f, chunk, 3)
    assert decoded.shapes_list == [(1, 2), (0, 2), (3, 2)]
    assert decoded.data_start == 8 * 4 + 8 * 3 * 2
    assert decoded.offsets == [0, 8, 8, 32]
    head = np.array([0, 8], "<u8").tobytes()
    with pytest.raises(ChunkFormatError, match=r"field 'boxes' has a shape that breaks \(-1, 2\)"):
        decode_var(f, head + np.array([2, 1], "<u8").tobytes() + bytes(8), 1)
    with pytest.raises(ChunkFormatError, match="field 'boxes' has shapes that disagree with its"):
        decode_var(f, head + np.array([2, 2], "<u8").tobytes() + bytes(8), 1)
    huge = np.array([2**62 + 1, 2], "<u8").tobytes()
    with pytest.raises(ChunkFormatError, match="field 'boxes' declares an absurdly large shape"):
        decode_var(f, head + huge + bytes(8), 1)
    # the head needs room for the shapes too
    with pytest.raises(ChunkFormatError, match="too short for the 32-byte head of 1 rows"):
        decode_var(f, head + bytes(8), 1)


@pytest.mark.parametrize(
    ("shape", "absurd"),
    [
        ((2**62, 1), False),
        ((2**62 + 1, 1), True),
        ((2**31, 2**31), False),
        ((2**31, 2**31 + 1), True),
        ((2**31 + 1, 2**31), True),
        ((0, 2**62), False),
        ((2**62, 0), False),
        ((2, 2**61), False),
        ((2, 2**61 + 1), True),  # 2**62 / (2**61 + 1) rounds to 2.0 in floats: integers only
        ((4, 2**61), True),
        ((2**21, 2**20, 2**21), False),
        ((2**21, 2**21, 2**21), True),  # each pair fits, the three do not
    ],
)
def test_absurd_shapes_are_those_beyond_2_62_elements(shape: tuple[int, ...], absurd: bool) -> None:
    shapes = np.array([[1] * len(shape), shape], dtype=np.uint64)
    assert _absurd_shapes(shapes) is absurd
    assert _absurd_shapes(shapes[::-1].copy()) is absurd


# --- schema -------------------------------------------------------------------------------


def _schema_error(spec: object) -> str:
    with pytest.raises(SchemaError) as info:
        parse_schema(spec)
    return str(info.value)


def test_field_specs_round_trip_through_to_dict() -> None:
    spec = {
        "a": {"type": "int32"},
        "b": {"type": "float32", "shape": [-1, 4], "compression": "zstd"},
        "c": {"type": "bytes", "compression": "none"},
        "d": {"type": "uint8", "shape": [0, 2], "compression": None},
    }
    schema = parse_schema(spec)
    assert schema.to_dict() == {
        "a": {"type": "int32"},
        "b": {"type": "float32", "shape": [-1, 4], "compression": "zstd"},
        "c": {"type": "bytes"},
        "d": {"type": "uint8", "shape": [0, 2]},
    }
    assert [f.compression for f in schema.fields] == ["none", "zstd", "none", "none"]
    assert schema.fields[1] == Field("b", "float32", (-1, 4), "zstd")
    shaped = parse_schema({"x": {"type": "int8", "shape": (np.int64(3), 2)}}).fields[0]
    assert shaped.shape == (3, 2) and all(type(d) is int for d in shaped.shape)


def test_schema_lookup_by_name() -> None:
    schema = parse_schema({"a": {"type": "int32"}, "b": {"type": "string"}})
    assert schema["b"].type == "string" and schema["a"].type == "int32"
    assert "a" in schema and "b" in schema and "c" not in schema
    with pytest.raises(KeyError) as info:
        schema["c"]
    assert info.value.args == ("c",)


def test_empty_schemas_are_refused_with_an_example() -> None:
    message = "schema is empty: give at least one field, e.g. {'label': {'type': 'int32'}}"
    assert _schema_error({}) == message
    with pytest.raises(SchemaError) as info:
        Schema(())
    assert str(info.value) == message
    assert _schema_error([("a", {"type": "int32"})]) == (
        "schema must be a dict of field name to spec, got list"
    )


def test_with_compression_sets_the_codec_on_the_fields_named() -> None:
    schema = parse_schema({"a": {"type": "int32"}, "b": {"type": "bytes"}})
    assert [f.compression for f in schema.with_compression("zstd").fields] == ["zstd", "zstd"]
    some = schema.with_compression("zstd", ["b"])
    assert some.fields == (Field("a", "int32"), Field("b", "bytes", None, "zstd"))
    assert some.with_compression("none", ["a"]).fields == some.fields
    with pytest.raises(SchemaError) as info:
        schema.with_compression("lz4")
    assert str(info.value) == "unknown compression 'lz4'; choose one of ['none', 'zstd']"
    with pytest.raises(SchemaError) as info:
        schema.with_compression("zstd", ["b", "z", "y"])
    assert str(info.value) == "cannot compress unknown field(s) ['y', 'z']"


def test_field_errors_quote_the_field_and_the_bad_value() -> None:
    assert _schema_error({"a b": {"type": "int32"}}) == (
        "field name 'a b' is invalid: use letters, digits and '_' only"
    )
    assert _schema_error({1: {"type": "int32"}}) == (
        "field name 1 is invalid: use letters, digits and '_' only"
    )
    assert _schema_error({"a": "int32"}) == (
        "field 'a': spec must be a dict like {'type': 'int32'}, got 'int32'"
    )
    assert _schema_error({"a": {"type": "int32", "shap": [1], "dtype": 1}}) == (
        "field 'a': unknown key(s) ['dtype', 'shap'] in {'type': 'int32', 'shap': [1], 'dtype': 1}"
    )
    choices = [
        "bool", "float16", "float32", "float64", "int16", "int32", "int64", "int8",
        "uint16", "uint8", "string", "bytes",
    ]  # fmt: skip
    assert _schema_error({"a": {"type": "int128"}}) == (
        f"field 'a': unknown type 'int128'; choose one of {choices}"
    )
    assert _schema_error({"a": {"shape": [1]}}) == (
        f"field 'a': unknown type None; choose one of {choices}"
    )
    assert _schema_error({"a": {"type": "int32", "compression": "lz4"}}) == (
        "field 'a': unknown compression 'lz4'; choose one of ['none', 'zstd']"
    )
    assert _schema_error({"a": {"type": "int32", "compression": 1}}) == (
        "field 'a': unknown compression 1; choose one of ['none', 'zstd']"
    )
    for name in ("string", "bytes"):
        assert parse_schema({"a": {"type": name}}).fields[0].type == name
    for name in NUMERIC_TYPES:
        assert parse_schema({"a": {"type": name}}).fields[0].type == name


def test_shape_errors_quote_the_field_and_the_bad_shape() -> None:
    assert _schema_error({"a": {"type": "string", "shape": [2]}}) == (
        "field 'a': type 'string' cannot have a shape (got [2])"
    )
    assert _schema_error({"a": {"type": "int32", "shape": "2"}}) == (
        "field 'a': shape must be a list of ints, got '2'"
    )
    assert _schema_error({"a": {"type": "int32", "shape": 2}}) == (
        "field 'a': shape must be a list of ints, got 2"
    )
    assert _schema_error({"a": {"type": "int32", "shape": []}}) == (
        "field 'a': shape must have 1 to 32 dimensions, got []"
    )
    assert _schema_error({"a": {"type": "int32", "shape": [1] * 33}}).startswith(
        "field 'a': shape must have 1 to 32 dimensions, got [1, 1,"
    )
    assert parse_schema({"a": {"type": "int32", "shape": [1] * 32}}).fields[0].shape == (1,) * 32
    assert parse_schema({"a": {"type": "int32", "shape": [5]}}).fields[0].shape == (5,)
    assert _schema_error({"a": {"type": "int32", "shape": [2, True]}}) == (
        "field 'a': shape dimension True is not an int in [2, True]"
    )
    assert _schema_error({"a": {"type": "int32", "shape": [2, 1.0]}}) == (
        "field 'a': shape dimension 1.0 is not an int in [2, 1.0]"
    )
    assert _schema_error({"a": {"type": "int32", "shape": [2, -2]}}) == (
        "field 'a': shape dimension -2 in [2, -2] must be >= 0, or -1 for a variable dimension"
    )
    assert _schema_error({"a": {"type": "int32", "shape": [1, -3]}}).startswith(
        "field 'a': shape dimension -3"
    )
    assert parse_schema({"a": {"type": "int32", "shape": [0, -1, 1]}}).fields[0].shape == (
        0,
        -1,
        1,
    )


# --- metadata -----------------------------------------------------------------------------

_SCHEMA = parse_schema(
    {
        "a": {"type": "int32"},
        "img": {"type": "uint8", "shape": [2, 2], "compression": "zstd"},
        "v": {"type": "float32", "shape": [-1]},
        "s": {"type": "string"},
    }
)
_DATA_END = 576


def _metadata(**changes: Any) -> ShardMetadata:
    """Two pages (3 and 2 rows) of four fields, chunks at 64-byte boundaries up to 576."""
    chunks = np.zeros((2, 4), dtype=CHUNK_DTYPE)
    chunks["offset"] = np.arange(64, 576, 64).reshape(2, 4)
    chunks["length"] = [[12, 9, 40, 40], [8, 8, 30, 64]]
    chunks["raw_length"] = [[12, 12, 40, 40], [8, 8, 30, 64]]
    chunks["crc32"] = np.arange(8).reshape(2, 4) + 0xFFFF0000
    chunks["codec"] = [[0, 1, 0, 0], [0, 0, 0, 0]]
    fields: dict[str, Any] = {
        "dataset_id": "0123456789abcdef0123456789abcdef",
        "dataset_name": "train.mrec",
        "generation": 3,
        "shard_index": 1,
        "shard_names": ("train.mrec0", "train.mrec1", "train.mrec2"),
        "schema": _SCHEMA,
        "desc": "some words",
        "index_fields": ("a", "s"),
        "page_size": 1 << 20,
        "num_rows": 5,
        "next_shard": 2,
        "page_rows": np.array([3, 2], dtype="<u4"),
        "chunks": chunks,
        "format_version": (1, 7),
        "previous_ends": (128, 320),
        "head_index": (HeadIndexEntry(0, 500, 40, 0xABCDEF01),),
    }
    fields.update(changes)
    return ShardMetadata(**fields)


def _doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = msgpack.unpackb(_metadata().encode(), raw=False)
    doc.update(changes)
    return doc


def _refusal(doc: Any, data_end: int = _DATA_END) -> str:
    with pytest.raises(MetadataError) as info:
        ShardMetadata.decode(msgpack.packb(doc, use_bin_type=True), data_end)
    return str(info.value)


def _assert_same(got: ShardMetadata, want: ShardMetadata) -> None:
    assert got == want  # every field but the two arrays
    np.testing.assert_array_equal(got.page_rows, want.page_rows)
    assert got.chunks.shape == want.chunks.shape
    assert got.chunks.tobytes() == np.ascontiguousarray(want.chunks).tobytes()


def test_metadata_round_trips_every_field() -> None:
    meta = _metadata(
        head_index=(HeadIndexEntry(0, 500, 40, 0xABCDEF01), HeadIndexEntry(1, 540, 8, 7))
    )
    back = ShardMetadata.decode(meta.encode(), _DATA_END)
    _assert_same(back, meta)
    assert back.format_version == (1, 7) and back.previous_ends == (128, 320)
    assert back.head_index == ((0, 500, 40, 0xABCDEF01), (1, 540, 8, 7))
    assert back.num_pages == 2 and back.chunks.shape == (2, 4)
    assert back.chunks[0, 1]["codec"] == 1 and back.chunks[1, 3]["length"] == 64
    no_desc = _metadata(desc=None, previous_ends=(), index_fields=(), head_index=())
    _assert_same(ShardMetadata.decode(no_desc.encode(), _DATA_END), no_desc)


def test_metadata_is_the_documented_messagepack_map() -> None:
    """Other implementations read these keys and byte layouts (docs/FORMAT.md)."""
    doc = msgpack.unpackb(_metadata().encode(), raw=False)
    assert doc == {
        "format_version": [1, 7],
        "dataset_id": "0123456789abcdef0123456789abcdef",
        "dataset_name": "train.mrec",
        "generation": 3,
        "shard_index": 1,
        "shard_names": ["train.mrec0", "train.mrec1", "train.mrec2"],
        "schema": [
            {"name": "a", "type": "int32", "shape": None, "compression": "none"},
            {"name": "img", "type": "uint8", "shape": [2, 2], "compression": "zstd"},
            {"name": "v", "type": "float32", "shape": [-1], "compression": "none"},
            {"name": "s", "type": "string", "shape": None, "compression": "none"},
        ],
        "desc": "some words",
        "index_fields": ["a", "s"],
        "page_size": 1 << 20,
        "num_rows": 5,
        "next_shard": 2,
        "page_rows": struct.pack("<II", 3, 2),
        "chunks": doc["chunks"],
        "previous_ends": [128, 320],
        "head_index": [[0, 500, 40, 0xABCDEF01]],
    }
    first = struct.pack("<QQQIB3x", 64, 12, 12, 0xFFFF0000, 0)
    assert len(doc["chunks"]) == 8 * 32 and doc["chunks"][:32] == first
    # strings are MessagePack str and the directories bin, whichever way they are read
    raw_doc = msgpack.unpackb(_metadata().encode(), raw=True)
    assert isinstance(raw_doc[b"page_rows"], bytes) and isinstance(raw_doc[b"dataset_id"], bytes)
    assert b"\xc4" in _metadata().encode() or b"\xc5" in _metadata().encode()  # bin 8/16


def test_with_pages_replaces_the_directory_and_other_fields() -> None:
    meta = _metadata()
    rows = np.array([5], dtype="<u4")
    chunks = meta.chunks[:1].copy()
    new = meta.with_pages(rows, chunks, num_rows=5, generation=4)
    assert new.page_rows is rows and new.chunks is chunks
    assert (new.num_rows, new.generation, new.dataset_id) == (5, 4, meta.dataset_id)
    assert meta.generation == 3


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a/b", "a\\b", "a\x00b", "x" * 256, "é" * 128, 7, None, b"name"],
)
def test_sibling_names_that_are_not_plain_file_names_are_refused(name: object) -> None:
    with pytest.raises(MetadataError) as info:
        check_basename(name)
    assert str(info.value) == f"sibling name {name!r} is not a plain file name"


def test_plain_sibling_names_are_kept() -> None:
    for name in ("a", "...", ".hidden", "x" * 255, "é" * 127 + "x", "train.mrec0"):
        assert check_basename(name) == name


def test_metadata_that_is_not_a_messagepack_map_is_refused() -> None:
    with pytest.raises(MetadataError, match="metadata is not valid MessagePack: "):
        ShardMetadata.decode(b"\xc1", _DATA_END)
    with pytest.raises(MetadataError, match="metadata is not valid MessagePack"):
        ShardMetadata.decode(b"", _DATA_END)
    assert _refusal([1, 2]) == "metadata must be a map, got list"
    with pytest.raises(MetadataError, match="not valid MessagePack"):  # keys must be strings
        int_key: dict[Any, Any] = {**_doc(), 1: 2}
        ShardMetadata.decode(msgpack.packb(int_key), _DATA_END)
    with pytest.raises(MetadataError, match="not valid MessagePack"):  # no extension types
        ShardMetadata.decode(msgpack.packb({**_doc(), "x": msgpack.ExtType(5, b"a")}), _DATA_END)


@pytest.mark.parametrize(
    "key",
    [
        "format_version", "dataset_id", "dataset_name", "generation", "shard_index",
        "shard_names", "schema", "index_fields", "page_size", "num_rows", "next_shard",
        "page_rows", "chunks",
    ],
)  # fmt: skip
def test_each_required_key_is_required_and_typed(key: str) -> None:
    doc = _doc()
    del doc[key]
    assert _refusal(doc) == f"metadata lacks {key!r}"
    wrong: object = True if isinstance(_doc()[key], (list, str, bytes)) else "7"
    assert _refusal(_doc(**{key: wrong})) == f"metadata {key!r} has the wrong type: {wrong!r}"


def test_integer_keys_refuse_booleans() -> None:
    assert _refusal(_doc(generation=True)) == "metadata 'generation' has the wrong type: True"
    assert _refusal(_doc(previous_ends=False)) == (
        "metadata 'previous_ends' has the wrong type: False"
    )


def test_optional_keys_may_be_absent() -> None:
    doc = _doc()
    del doc["desc"], doc["previous_ends"]
    meta = ShardMetadata.decode(msgpack.packb(doc, use_bin_type=True), _DATA_END)
    assert meta.desc is None and meta.previous_ends == ()
    assert _refusal(_doc(desc=5)) == "desc must be a string, got 5"


def test_format_version_is_checked() -> None:
    for version in ([1], [1, 2, 3], [2, 0], [1, "2"], [0, 2]):
        assert _refusal(_doc(format_version=version)) == f"unsupported format version {version!r}"
    assert ShardMetadata.decode(
        msgpack.packb(_doc(format_version=[1, 0]), use_bin_type=True), _DATA_END
    ).format_version == (1, 0)


def test_identity_fields_are_checked() -> None:
    assert _refusal(_doc(dataset_id="0123456789ABCDEF0123456789abcdef")) == (
        "dataset_id '0123456789ABCDEF0123456789abcdef' is not 32 hex digits"
    )
    assert _refusal(_doc(dataset_id="0" * 33)) == f"dataset_id {'0' * 33!r} is not 32 hex digits"
    assert _refusal(_doc(shard_names=["a", "../b"])) == (
        "sibling name '../b' is not a plain file name"
    )
    assert _refusal(_doc(dataset_name="../x")) == "sibling name '../x' is not a plain file name"
    assert _refusal(_doc(shard_index=3)) == "shard_index 3 is outside 0..2"
    assert _refusal(_doc(shard_index=-1)) == "shard_index -1 is outside 0..2"
    for index in (0, 2):
        meta = ShardMetadata.decode(
            msgpack.packb(_doc(shard_index=index), use_bin_type=True), _DATA_END
        )
        assert meta.shard_index == index
    assert _refusal(_doc(index_fields=["a", "zz"])) == "index field 'zz' is not in the schema"
    assert _refusal(_doc(index_fields=[3])) == "index field 3 is not in the schema"


def test_counts_are_checked() -> None:
    message = "metadata has a negative or out-of-range count"
    assert _refusal(_doc(generation=-1)) == message
    assert _refusal(_doc(next_shard=3)) == message
    assert _refusal(_doc(next_shard=-1)) == message
    assert _refusal(_doc(page_size=0)) == message
    for ok in ({"generation": 0}, {"next_shard": 0}, {"page_size": 1}):
        ShardMetadata.decode(msgpack.packb(_doc(**ok), use_bin_type=True), _DATA_END)
    empty = _doc(num_rows=0, page_rows=b"", chunks=b"", head_index=[])
    meta = ShardMetadata.decode(msgpack.packb(empty, use_bin_type=True), _DATA_END)
    assert meta.num_rows == 0 and meta.chunks.shape == (0, 4)
    negative = _doc(num_rows=-1, page_rows=b"", chunks=b"", head_index=[])
    assert _refusal(negative) == "pages hold 0 rows, metadata says -1"


def test_previous_ends_must_increase_inside_the_pages() -> None:
    for ends in ([64], [128, 128], [200, 100], [_DATA_END + 1], [128, True], [128.0]):
        assert _refusal(_doc(previous_ends=ends)) == (
            f"previous_ends {ends!r} must increase inside the pages"
        )
    ok = _doc(previous_ends=[65, _DATA_END])
    meta = ShardMetadata.decode(msgpack.packb(ok, use_bin_type=True), _DATA_END)
    assert meta.previous_ends == (65, _DATA_END)


def test_stored_schema_is_checked() -> None:
    schema = _doc()["schema"]
    assert _refusal(_doc(schema=[*schema[:3], "s"])) == "schema entry 's' is malformed"
    assert _refusal(_doc(schema=[{"type": "int32"}])) == (
        "schema entry {'type': 'int32'} is malformed"
    )
    bad_type = [{**schema[0], "type": "int128"}, *schema[1:]]
    assert _refusal(_doc(schema=bad_type)).startswith(
        "stored schema is invalid: field 'a': unknown type 'int128'"
    )
    repeated = [schema[0], {**schema[0], "type": "int64"}]
    assert _refusal(_doc(schema=repeated)) == "stored schema repeats a field name"
    # shape and compression are read back from the entries
    meta = ShardMetadata.decode(_metadata().encode(), _DATA_END)
    assert meta.schema == _SCHEMA


def test_fixed_chunks_must_hold_rows_times_row_bytes() -> None:
    meta = _metadata()
    chunks = meta.chunks.copy()
    chunks[1, 1]["raw_length"] = 9
    assert _refusal(_doc(chunks=chunks.tobytes())) == (
        "page 1, field 'img': raw length 9 is not 2 rows of 4 bytes"
    )
    chunks = meta.chunks.copy()
    chunks[0, 0]["raw_length"] = 11
    assert _refusal(_doc(chunks=chunks.tobytes())) == (
        "page 0, field 'a': raw length 11 is not 3 rows of 4 bytes"
    )
    # variable-size fields have no such rule
    chunks = meta.chunks.copy()
    chunks[0, 2]["raw_length"] = 41
    chunks[0, 3]["raw_length"] = 41
    ShardMetadata.decode(msgpack.packb(_doc(chunks=chunks.tobytes()), use_bin_type=True), 576)


@pytest.mark.parametrize(
    ("shape", "refused"),
    [([1 << 28], False), ([(1 << 28) + 1], True), ([1 << 15, 1 << 15], True), ([1 << 30], True)],
)
def test_absurd_fixed_rows_are_refused_even_without_pages(shape: list[int], refused: bool) -> None:
    entry = {"name": "x", "type": "int32", "shape": shape, "compression": "none"}
    doc = _doc(schema=[entry], page_rows=b"", chunks=b"", num_rows=0, index_fields=[])
    if refused:
        per_row = 4 * int(np.prod(shape))
        assert _refusal(doc) == (f"field 'x' declares {per_row} bytes per row (shape {shape})")
    else:
        ShardMetadata.decode(msgpack.packb(doc, use_bin_type=True), _DATA_END)


def test_page_directory_is_checked() -> None:
    doc = _doc()
    assert _refusal(_doc(page_rows=doc["page_rows"] + b"\0")) == (
        "page directory has a partial record"
    )
    assert _refusal(_doc(chunks=doc["chunks"] + b"\0" * 8)) == (
        "page directory has a partial record"
    )
    assert _refusal(_doc(chunks=doc["chunks"][:-32])) == (
        "page directory has 7 chunks for 2 pages of 4 fields"
    )
    assert _refusal(_doc(num_rows=6)) == "pages hold 5 rows, metadata says 6"
    past = "a chunk points past the pages or has an unknown codec"
    assert _refusal(doc, _DATA_END - 1) == past
    ShardMetadata.decode(msgpack.packb(doc, use_bin_type=True), _DATA_END)  # ends at data_end
    meta = _metadata()
    for column, value in (("offset", 63), ("codec", 2)):
        chunks = meta.chunks.copy()
        chunks[1, 2][column] = value
        assert _refusal(_doc(chunks=chunks.tobytes())) == past
    chunks = meta.chunks.copy()
    chunks[0, 0]["offset"] = 64  # exactly after the header: fine
    chunks[1, 3]["length"] = 0
    chunks[1, 3]["raw_length"] = 0
    ShardMetadata.decode(msgpack.packb(_doc(chunks=chunks.tobytes()), use_bin_type=True), 576)


def test_fixed_values_are_stored_little_endian_in_the_field_type() -> None:
    """Python ints, another integer type or big-endian input: the chunk holds the field's type."""
    f = _field("n", {"type": "int32"})
    assert encode_chunk(f, [1, 2, -3]) == np.array([1, 2, -3], dtype="<i4").tobytes()
    assert encode_chunk(f, np.array([1, 2], dtype=">i8")) == b"\x01\0\0\0\x02\0\0\0"
    g = _field("v", {"type": "float32", "shape": [-1]})
    values = [np.array([1.5, 2.5]), np.array([0.25], dtype=">f8")]
    chunk = encode_chunk(g, values)
    assert chunk[-12:] == np.array([1.5, 2.5, 0.25], dtype="<f4").tobytes()
    assert decode_var(g, chunk, 2).offsets == [0, 8, 12]


def test_bytes_values_are_stored_by_their_bytes_not_their_length() -> None:
    """A memoryview of int32 has len() 3 but 12 bytes: the offsets count bytes."""
    f = _field("b", {"type": "bytes"})
    view = memoryview(np.arange(3, dtype="<i4").data)
    chunk = encode_chunk(f, [bytearray(b"ab"), view, b"c"])
    offsets = np.frombuffer(chunk[:32], dtype="<u8").tolist()
    assert offsets == [0, 2, 14, 15]
    assert chunk[32:] == b"ab" + np.arange(3, dtype="<i4").tobytes() + b"c"


def test_encode_page_records_the_byte_length_of_shaped_fixed_columns() -> None:
    schema = parse_schema({"img": {"type": "uint16", "shape": [2, 3]}})
    values = np.arange(24, dtype="<u2").reshape(2, 2, 3, 2)[..., 0]
    (chunk,) = encode_page(schema, {"img": values})
    assert chunk.stored == np.ascontiguousarray(values).tobytes()
    assert (chunk.length, chunk.raw_length, chunk.crc32) == (24, 24, checksum(chunk.stored))


def test_a_fixed_zero_dimension_of_a_vararray_is_checked() -> None:
    f = _field("e", {"type": "float32", "shape": [0, -1]})
    head = np.array([0, 24], "<u8").tobytes()
    with pytest.raises(ChunkFormatError, match=r"has a shape that breaks \(0, -1\)"):
        decode_var(f, head + np.array([2, 3], "<u8").tobytes() + bytes(24), 1)
    empty = np.array([0, 0], "<u8").tobytes() + np.array([0, 7], "<u8").tobytes()
    assert decode_var(f, empty, 1).shapes_list == [(0, 7)]


def test_with_compression_keeps_types_and_shapes() -> None:
    schema = parse_schema({"v": {"type": "float32", "shape": [-1, 3]}, "n": {"type": "int8"}})
    assert schema.with_compression("zstd", ["v"]).fields == (
        Field("v", "float32", (-1, 3), "zstd"),
        Field("n", "int8"),
    )


def test_metadata_stores_page_rows_as_u32_whatever_array_it_is_given() -> None:
    meta = _metadata(page_rows=np.array([3, 2], dtype=np.int64))
    assert msgpack.unpackb(meta.encode())["page_rows"] == struct.pack("<II", 3, 2)
    back = ShardMetadata.decode(meta.encode(), _DATA_END)
    assert back.page_rows.dtype == np.dtype("<u4") and back.page_rows.tolist() == [3, 2]


def test_fixed_fields_after_variable_ones_are_checked_too() -> None:
    schema = [
        {"name": "s", "type": "string", "shape": None, "compression": "none"},
        {"name": "n", "type": "int64", "shape": None, "compression": "none"},
    ]
    chunks = np.zeros((1, 2), dtype=CHUNK_DTYPE)
    chunks["offset"] = [[64, 128]]
    chunks["length"] = chunks["raw_length"] = [[24, 15]]
    doc = _doc(schema=schema, index_fields=[], page_rows=struct.pack("<I", 2), num_rows=2)
    doc["chunks"] = chunks.tobytes()
    assert _refusal(doc) == "page 0, field 'n': raw length 15 is not 2 rows of 8 bytes"
    huge = {"name": "x", "type": "int32", "shape": [1 << 29], "compression": "none"}
    for fields in ([schema[0], huge], [schema[1], huge]):  # also after a fixed field
        empty = _doc(schema=fields, index_fields=[], page_rows=b"", chunks=b"", num_rows=0)
        assert _refusal(empty) == f"field 'x' declares {4 << 29} bytes per row (shape [{1 << 29}])"
