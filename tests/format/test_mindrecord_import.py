"""Native MindRecord reading, checked against files written by MindSpore 2.10.

The fixtures in tests/fixtures/mindrecord/ are real MindSpore output; each
``NAME.expected.json`` lists the schema and every row as MindSpore read them.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.convert.mindrecord import MindRecordDataset
from mrecord.convert.mindrecord.codec import decode_int_array
from mrecord.errors import (
    ConversionError,
    CorruptFileError,
    DatasetNotFoundError,
    ForeignShardError,
    IndexMismatchError,
    MrecordError,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mindrecord"
SAMPLES = {
    "alltypes": "alltypes.mindrecord",
    "images": "images.mindrecord",
    "sharded": "sharded.mindrecord0",
}


def expected(name: str) -> dict[str, Any]:
    stem = "sharded.mindrecord" if name == "sharded" else SAMPLES[name]
    with open(FIXTURES / f"{stem}.expected.json", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def assert_value_equal(got: Any, want: Any, type_name: str, where: str) -> None:
    if isinstance(want, dict) and "bytes_hex" in want:
        assert isinstance(got, bytes), where
        assert got == bytes.fromhex(want["bytes_hex"]), where
    elif isinstance(want, dict) and "dtype" in want:
        assert isinstance(got, np.ndarray), where
        assert got.dtype == np.dtype(want["dtype"]), where
        assert list(got.shape) == want["shape"], where
        np.testing.assert_array_equal(
            got.reshape(-1), np.asarray(want["data"], dtype=want["dtype"]), err_msg=where
        )
    elif type_name == "string":
        assert got == want, where
    else:
        dtype = np.dtype(type_name)
        assert np.asarray(got).dtype == dtype, where
        assert np.asarray(got) == np.asarray(want, dtype=dtype), where


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_row_and_field_matches_mindspore(name: str) -> None:
    exp = expected(name)
    with MindRecordDataset.open(FIXTURES / SAMPLES[name]) as ds:
        assert len(ds.shards) == exp["shard_num"]
        assert {f.name: f.to_dict() for f in ds.fields} == exp["schema"]
        assert ds.num_rows == len(exp["rows"])
        rows = list(ds.iter_rows())
    assert len(rows) == len(exp["rows"])
    for i, (got, want) in enumerate(zip(rows, exp["rows"], strict=True)):
        assert set(got) == set(want), f"row {i}"
        for field, value in want.items():
            assert_value_equal(got[field], value, exp["schema"][field]["type"], f"row {i} {field}")


def test_sharded_opens_from_any_shard_in_shard_order(tmp_path: Path) -> None:
    ids = []
    for k in range(4):
        with MindRecordDataset.open(FIXTURES / f"sharded.mindrecord{k}") as ds:
            assert [p.name for p in ds.files] == [f"sharded.mindrecord{j}" for j in range(4)]
            ids.append([int(r["id"]) for r in ds.iter_rows()])
    assert all(x == ids[0] for x in ids)
    assert ids[0] == [r["id"] for r in expected("sharded")["rows"]]


def test_batches_are_columnar_with_fixed_shapes_stacked() -> None:
    with MindRecordDataset.open(FIXTURES / SAMPLES["alltypes"]) as ds:
        batches = list(ds.iter_batches(batch_rows=7))
    assert [len(b["i32"]) for b in batches] == [7, 7, 7, 7, 2]
    first = batches[0]
    assert isinstance(first["i32"], np.ndarray) and first["i32"].dtype == np.int32
    assert isinstance(first["a_i64"], np.ndarray) and first["a_i64"].shape == (7, 2, 3)
    assert isinstance(first["a_f64"], np.ndarray) and first["a_f64"].shape == (7, 5)
    assert isinstance(first["a_i32"], list)  # shape [-1]: variable, one array per row
    assert isinstance(first["b"], list) and isinstance(first["s"], list)


def test_index_files_are_checked_when_present() -> None:
    with MindRecordDataset.open(FIXTURES / "sharded.mindrecord1") as ds:
        assert ds.indexed_shards == 4


def copy_sample(tmp_path: Path, name: str) -> Path:
    for f in FIXTURES.iterdir():
        if f.name.startswith(SAMPLES[name].rstrip("0")) and not f.name.endswith(".json"):
            shutil.copy(f, tmp_path / f.name)
    return tmp_path / SAMPLES[name]


# ---------------------------------------------------------------- damaged input


def test_missing_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.mindrecord"
    with pytest.raises(DatasetNotFoundError, match=r"nope\.mindrecord"):
        MindRecordDataset.open(missing)


def test_garbage_is_not_a_mindrecord_file(tmp_path: Path) -> None:
    bad = tmp_path / "garbage.bin"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 10)
    with pytest.raises(ConversionError, match=r"garbage\.bin.*not a MindRecord file"):
        MindRecordDataset.open(bad)


def test_zeroed_header_of_an_uncommitted_file(tmp_path: Path) -> None:
    # MindSpore leaves a zeroed header when killed before commit.
    path = copy_sample(tmp_path, "images")
    data = bytearray(path.read_bytes())
    data[:16384] = bytes(16384)
    path.write_bytes(bytes(data))
    with pytest.raises(ConversionError, match="not a MindRecord file"):
        MindRecordDataset.open(path)


def test_header_json_garbage(tmp_path: Path) -> None:
    path = copy_sample(tmp_path, "images")
    data = bytearray(path.read_bytes())
    data[8:20] = b"#not json!!#"
    path.write_bytes(bytes(data))
    with pytest.raises(ConversionError, match="not JSON"):
        MindRecordDataset.open(path)


def test_truncated_file_names_file_and_page(tmp_path: Path) -> None:
    path = copy_sample(tmp_path, "alltypes")
    data = path.read_bytes()
    path.write_bytes(data[: 16384 + 1000])  # inside the first (blob) page
    with pytest.raises(CorruptFileError, match=r"alltypes\.mindrecord.*page 0.*truncated") as ei:
        MindRecordDataset.open(path, check_index=False)
    assert ei.value.page == 0 and ei.value.offset == 16384


def test_inflated_record_length_names_offset(tmp_path: Path) -> None:
    path = copy_sample(tmp_path, "images")
    data = bytearray(path.read_bytes())
    raw_page = 16384 + 32768
    data[raw_page : raw_page + 8] = struct.pack("<Q", 10**12)
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=f"record at byte {raw_page}") as ei:
        MindRecordDataset.open(path, check_index=False)
    assert ei.value.offset == raw_page and ei.value.page == 1


def test_missing_sibling_shard(tmp_path: Path) -> None:
    path = copy_sample(tmp_path, "sharded")
    (tmp_path / "sharded.mindrecord2").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"sharded\.mindrecord2"):
        MindRecordDataset.open(path)


def test_foreign_sibling_shard(tmp_path: Path) -> None:
    path = copy_sample(tmp_path, "sharded")
    shutil.copy(tmp_path / "sharded.mindrecord0", tmp_path / "sharded.mindrecord3")
    with pytest.raises(ForeignShardError, match=r"sharded\.mindrecord3.*not shard 3"):
        MindRecordDataset.open(path, check_index=False)


def test_db_of_another_file_is_reported(tmp_path: Path) -> None:
    path = copy_sample(tmp_path, "alltypes")
    shutil.copy(FIXTURES / "images.mindrecord.db", tmp_path / "alltypes.mindrecord.db")
    with pytest.raises(IndexMismatchError, match=r"alltypes\.mindrecord\.db"):
        MindRecordDataset.open(path)
    with MindRecordDataset.open(path, check_index=False) as ds:
        assert ds.num_rows == 30


@given(
    st.sampled_from(["alltypes", "images"]),
    st.lists(st.tuples(st.integers(0, 51041), st.integers(0, 255)), min_size=1, max_size=8),
    st.one_of(st.none(), st.integers(0, 51041)),
)
def test_damaged_files_raise_only_mrecord_errors(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    flips: list[tuple[int, int]],
    cut: int | None,
) -> None:
    tmp = tmp_path_factory.mktemp("dmg")
    data = bytearray((FIXTURES / SAMPLES[name]).read_bytes())
    for pos, value in flips:
        if pos < len(data):
            data[pos] = value
    if cut is not None:
        data = data[:cut]
    path = tmp / SAMPLES[name]
    path.write_bytes(bytes(data))
    try:
        with MindRecordDataset.open(path, check_index=False) as ds:
            for _ in ds.iter_batches(batch_rows=16):
                pass
    except MrecordError as exc:
        assert str(path) in str(exc) or SAMPLES[name] in str(exc)


# ---------------------------------------------------------------- the integer encoding


def encode_ints(values: list[int]) -> bytes:
    """Independent encoder written from MINDRECORD_FORMAT.md (the test's oracle)."""
    codes = []
    body = b""
    for v in values:
        for code, width in enumerate((1, 2, 4, 8)):
            if -(2 ** (8 * width - 1)) <= v < 2 ** (8 * width - 1):
                codes.append(code)
                body += v.to_bytes(width, "little", signed=True)
                break
    packed = bytearray((len(codes) + 3) // 4)
    for i, c in enumerate(codes):
        packed[i // 4] |= c << (6 - 2 * (i % 4))
    return len(values).to_bytes(4, "big") + bytes(packed) + body


def test_int_encoding_hand_checked() -> None:
    # count 2, codes 00 01 (int8, int16): 0x10, then 0x00 and 1000 = e8 03.
    data = bytes.fromhex("000000021000e803")
    got = decode_int_array(data, "int32", path="x", field="f", offset=0)
    assert got.dtype == np.int32 and got.tolist() == [0, 1000]


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40))
def test_int_encoding_round_trip(values: list[int]) -> None:
    got = decode_int_array(encode_ints(values), "int64", path="x", field="f", offset=0)
    assert got.tolist() == values


def test_int_encoding_count_larger_than_data() -> None:
    data = (2**31).to_bytes(4, "big") + b"\x00" * 10
    with pytest.raises(CorruptFileError, match="claims 2147483648 values"):
        decode_int_array(data, "int64", path="x", field="f", offset=0)


# ---------------------------------------------------------------- many pages


def build_mindrecord(
    path: Path, rows: list[dict[str, Any]], page_size: int = 256
) -> list[tuple[int, int, int, int, int, int]]:
    """Write a MindRecord file from MINDRECORD_FORMAT.md with several pages of each type,
    page ids interleaved between the types (as MindSpore allocates them as pages fill).
    Returns each row's location as MindSpore's ``.db`` gives it: (raw page, raw record's
    offset in its page, its end, blob page, blob offset, blob end)."""
    import msgpack

    header_size = 1 << 16  # room for the page list of the largest generated file

    def framed(payload: bytes) -> bytes:
        return struct.pack("<Q", len(payload)) + payload

    raw = [framed(msgpack.packb({"id": r["id"], "name": r["name"]})) for r in rows]
    blob = []
    for r in rows:
        parts = [encode_ints(r["arr"]), r["data"]]  # blob fields in name order: arr, data
        blob.append(framed(b"".join(struct.pack(">Q", len(p)) + p for p in parts)))

    def paginate(records: list[bytes]) -> list[tuple[int, int, bytes]]:
        pages: list[tuple[int, int, bytes]] = []
        cur: list[bytes] = []  # joined once a page (+= was quadratic)
        start = used = 0
        for i, rec in enumerate(records):
            if cur and used + len(rec) > page_size:
                pages.append((start, i, b"".join(cur)))
                start, cur, used = i, [], 0
            cur.append(rec)
            used += len(rec)
        pages.append((start, len(records), b"".join(cur)))
        return pages

    blob_pages, raw_pages = paginate(blob), paginate(raw)
    order: list[tuple[str, int]] = []
    for k in range(max(len(blob_pages), len(raw_pages))):
        order += [("BLOB_DATA", k)] if k < len(blob_pages) else []
        order += [("RAW_DATA", k)] if k < len(raw_pages) else []
    places: dict[str, list[tuple[int, int, int]]] = {"BLOB_DATA": [], "RAW_DATA": []}
    meta, body = [], bytearray()
    for page_id, (kind, k) in enumerate(order):
        start, end, data = (blob_pages if kind == "BLOB_DATA" else raw_pages)[k]
        offset = 0
        for record in (blob if kind == "BLOB_DATA" else raw)[start:end]:
            places[kind].append((page_id, offset, offset + len(record)))
            offset += len(record)
        meta.append(
            {
                "page_id": page_id,
                "shard_id": 0,
                "page_type": kind,
                "page_type_id": k,
                "start_row_id": start if kind == "BLOB_DATA" else 0,
                "end_row_id": end if kind == "BLOB_DATA" else 0,
                "row_group_ids": [{"id": 0, "offset": 0}],
                "page_size": len(data),
            }
        )
        assert len(data) <= page_size
        padded = data if page_id == len(order) - 1 else data.ljust(page_size, b"\0")
        body += padded
    header = {
        "header_size": header_size,
        "page_size": page_size,
        "index_fields": [{"index_field": "id", "schema_id": 0}],
        "page": meta,
        "compression_size": 0,
        "schema": [
            {
                "blob_fields": ["arr", "data"],
                "desc": "synthetic",
                "schema": {
                    "arr": {"type": "int32", "shape": [-1]},
                    "data": {"type": "bytes"},
                    "id": {"type": "int64"},
                    "name": {"type": "string"},
                },
            }
        ],
        "shard_addresses": [path.name],
        "shard_id": 0,
        "statistics": None,
        "version": "3.0",
    }
    text = json.dumps(header, separators=(",", ":")).encode()
    head = (struct.pack("<Q", len(text)) + text).ljust(header_size, b"\0")
    path.write_bytes(head + bytes(body))
    return [(*r, *b) for r, b in zip(places["RAW_DATA"], places["BLOB_DATA"], strict=True)]


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "arr": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=12),
                "data": st.binary(max_size=60),
                "name": st.text(max_size=10),
            }
        ),
        min_size=1,
        max_size=30,
    )
)
def test_many_pages_read_in_type_order(
    tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]]
) -> None:
    for i, r in enumerate(rows):
        r["id"] = i * 2**40 - 7
    path = tmp_path_factory.mktemp("pages") / "syn.mindrecord"
    build_mindrecord(path, rows)
    with MindRecordDataset.open(path) as ds:
        assert ds.indexed_shards == 0  # no .db: the data alone is enough
        assert ds.desc == "synthetic" and ds.index_fields == ("id",)
        got = list(ds.iter_rows())
    assert len(got) == len(rows)
    for g, want in zip(got, rows, strict=True):
        assert int(g["id"]) == want["id"] and g["name"] == want["name"]
        assert g["data"] == want["data"]
        assert g["arr"].dtype == np.int32 and g["arr"].tolist() == want["arr"]
