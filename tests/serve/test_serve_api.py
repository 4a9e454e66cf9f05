"""`mrecord serve`'s HTTP API, in-process (Starlette's TestClient): answers, limits, security.

The dataset is the gallery (``harness.gallery``): what each answer must hold is
computed here from the rows written, not from the server's code.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from PIL import Image
from starlette.testclient import TestClient

from harness.gallery import SIZE, write_gallery
from mrecord import DatasetReader, FileWriter
from mrecord.cli.main import cli
from mrecord.errors import ArgumentError
from mrecord.serve.protocol.errors import ERROR_CODES
from mrecord.serve.protocol.limits import Limits
from mrecord.serve.protocol.wire import decode_block, encode_request
from mrecord.serve.server.app import create_app
from mrecord.serve.server.registry import ServedDataset, open_datasets, parse_dataset_args
from mrecord.serve.server.security import check_bind
from mrecord.storage.shard import ShardFile

ROWS = 60
BASE = "http://127.0.0.1"


@pytest.fixture(scope="module")
def gallery(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 60-row, 3-shard gallery dataset; returns its first shard."""
    return write_gallery(tmp_path_factory.mktemp("gallery") / "gallery.mrecord", ROWS, shards=3)


@pytest.fixture(scope="module")
def truth(gallery: Path) -> dict[str, Any]:
    """Every value of the gallery, read locally."""
    with DatasetReader.open(gallery) as reader:
        block = reader.read_rows(np.arange(reader.num_rows))
        return dict(block.columns)


@pytest.fixture(scope="module")
def served(gallery: Path) -> Iterator[dict[str, ServedDataset]]:
    datasets = open_datasets({"gallery": gallery})
    yield datasets
    for ds in datasets.values():
        ds.close()


@pytest.fixture(scope="module")
def client(served: dict[str, ServedDataset]) -> Iterator[TestClient]:
    limits = Limits(max_page_rows=25, max_block_rows=1000, max_body_bytes=16_000)
    with TestClient(create_app(served, limits=limits), base_url=BASE) as c:
        yield c


def _verify_result(client: TestClient, name: str) -> dict[str, Any]:
    """``info``'s verify answer once the background check is done."""
    for _ in range(400):
        verify: dict[str, Any] = client.get(f"/api/datasets/{name}?verify=1").json()["verify"]
        if verify["state"] == "done":
            return verify
        time.sleep(0.05)
    raise AssertionError(f"verify of {name!r} did not finish")


def _error(response: Any, code: str) -> str:
    assert response.status_code == ERROR_CODES[code], response.text
    body = response.json()
    assert body["error"]["code"] == code
    assert "Traceback" not in body["error"]["message"]
    message: str = body["error"]["message"]
    return message


# -- answers --------------------------------------------------------------------------------------


def test_dataset_list_names_rows_shards_and_schema(client: TestClient) -> None:
    body = client.get("/api/datasets").json()
    (entry,) = body["datasets"]
    assert entry["name"] == "gallery"
    assert entry["rows"] == ROWS and entry["shards"] == 3
    assert [f["name"] for f in entry["schema"]] == ["png", "pixels", "label", "name", "score"]
    assert entry["bytes"] > ROWS * SIZE * SIZE * 3


def test_info_has_shards_index_fields_verify_and_no_server_paths(
    client: TestClient, gallery: Path
) -> None:
    info = client.get("/api/datasets/gallery").json()
    # a program's request starts no verify (it reads every page); the page's does
    assert info["verify"] == {"state": "not started"}
    info = client.get("/api/datasets/gallery?verify=1").json()
    assert info["rows"] == ROWS
    assert [f["file"] for f in info["files"]] == [f"gallery.mrecord{i}" for i in range(3)]
    assert sum(f["rows"] for f in info["files"]) == ROWS
    assert info["index_fields"] == ["label", "name"]
    assert info["verify"]["state"] in ("running", "done")
    verify = _verify_result(client, "gallery")
    assert verify["ok"] is True and verify["pages_checked"] == info["pages"]
    assert sorted(info["image_columns"]) == ["pixels", "png"]
    assert str(gallery.parent) not in json.dumps(info)


def test_rows_page_gives_values_with_dtype_shape_and_base64(
    client: TestClient, truth: dict[str, Any]
) -> None:
    body = client.get("/api/datasets/gallery/rows?start=5&stop=8").json()
    assert (body["start"], body["stop"], body["total"]) == (5, 8, ROWS)
    assert [r["id"] for r in body["rows"]] == [5, 6, 7]
    row = body["rows"][0]["values"]
    assert row["label"] == int(truth["label"][5])
    assert row["name"] == truth["name"][5]
    assert row["pixels"]["dtype"] == "uint8" and row["pixels"]["shape"] == [SIZE, SIZE, 3]
    assert np.array_equal(np.array(row["pixels"]["data"], dtype=np.uint8), truth["pixels"][5])
    assert base64.b64decode(row["png"]["base64"]) == truth["png"][5]
    assert row["score"] == pytest.approx(float(truth["score"][5]))


def test_rows_columns_and_summary_view(client: TestClient) -> None:
    body = client.get("/api/datasets/gallery/rows?start=0&stop=2&columns=pixels,label&view=summary")
    rows = body.json()["rows"]
    assert list(rows[0]["values"]) == ["pixels", "label"]
    pixels = rows[0]["values"]["pixels"]
    assert "data" not in pixels and len(pixels["head"]) == 8


def test_huge_stop_minus_start_is_cut_to_the_page_cap(client: TestClient) -> None:
    body = client.get("/api/datasets/gallery/rows?start=3&stop=999999999999").json()
    assert len(body["rows"]) == 25 and body["stop"] == 28
    past = client.get("/api/datasets/gallery/rows?start=500&stop=600").json()
    assert past["rows"] == []


@pytest.mark.parametrize(
    "query", ["start=-1", "start=abc", "stop=1e9", "start=" + "9" * 40, "view=raw"]
)
def test_bad_row_parameters_are_400(client: TestClient, query: str) -> None:
    _error(client.get(f"/api/datasets/gallery/rows?{query}"), "bad_request")


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/api/datasets/gallery/rows?start=%C2%B2", "bad_request"),
        ("/api/datasets/gallery/rows?start=--5", "bad_request"),
        ("/api/datasets/gallery/rows?stop=%C2%B2", "bad_request"),
        ("/api/datasets/gallery/rows/%C2%B2/png.png", "bad_ids"),
        ("/api/datasets/gallery/rows/1/png.png?size=%C2%B2", "bad_request"),
        ("/api/datasets/gallery/rows/1/png.png?size=--5", "bad_request"),
        ("/api/datasets/gallery/search?field=label&value=1&page=%C2%B2", "bad_request"),
        ("/api/datasets/gallery/search?field=label&value=1&num_row=--5", "bad_request"),
        ("/api/datasets/gallery/search?field=label&value=1&num_row=%EF%BC%95", "bad_request"),
    ],
)
def test_integers_that_are_not_ascii_digits_are_400_not_500(
    client: TestClient, path: str, code: str
) -> None:
    message = _error(client.get(path), code)
    assert "integer" in message


def test_unknown_column_is_400(client: TestClient) -> None:
    response = client.get("/api/datasets/gallery/rows?columns=label,secret")
    message = _error(response, "unknown_column")
    assert "secret" in message


def test_search_by_label_gives_exactly_the_rows_with_that_label(
    client: TestClient, truth: dict[str, Any]
) -> None:
    want = np.flatnonzero(truth["label"] == 3).tolist()
    body = client.get("/api/datasets/gallery/search?field=label&value=3&num_row=100").json()
    assert [r["id"] for r in body["rows"]] == want
    assert all(r["values"]["label"] == 3 for r in body["rows"])
    assert body["total"] == len(want)
    page1 = client.get("/api/datasets/gallery/search?field=label&value=3&num_row=2&page=1").json()
    assert [r["id"] for r in page1["rows"]] == want[2:4]


def test_search_by_string_index_and_category_list(
    client: TestClient, truth: dict[str, Any]
) -> None:
    name = truth["name"][7]
    body = client.get("/api/datasets/gallery/search", params={"field": "name", "value": name})
    assert [r["id"] for r in body.json()["rows"]] == [7]
    cats = client.get("/api/datasets/gallery/search?field=label").json()
    counts = {c["name"]: c["count"] for c in cats["categories"]}
    labels, numbers = np.unique(truth["label"], return_counts=True)
    assert counts == {int(k): int(v) for k, v in zip(labels, numbers, strict=True)}


@pytest.mark.parametrize(
    "query",
    [
        "field=score&value=1",  # not an index field
        "field=label%3B%20DROP%20TABLE%20rows&value=1",  # SQL in the field name
        "field=label&value=three",  # does not fit int32
    ],
)
def test_search_refuses_non_index_fields_and_bad_values(client: TestClient, query: str) -> None:
    _error(client.get(f"/api/datasets/gallery/search?{query}"), "bad_request")


def test_search_value_with_sql_is_just_a_value(client: TestClient) -> None:
    params = {"field": "name", "value": "x' OR 1=1 --"}
    body = client.get("/api/datasets/gallery/search", params=params)
    assert body.status_code == 200 and body.json()["rows"] == []


def test_stats_match_the_written_values(client: TestClient, truth: dict[str, Any]) -> None:
    stats = client.get("/api/datasets/gallery/stats").json()["fields"]
    labels, counts = np.unique(truth["label"], return_counts=True)
    assert stats["label"]["histogram"] == {
        str(k): int(v) for k, v in zip(labels, counts, strict=True)
    }
    assert stats["score"]["min"] == pytest.approx(float(truth["score"].min()))
    assert stats["score"]["max"] == pytest.approx(float(truth["score"].max()))
    assert stats["pixels"]["mean"] == pytest.approx(float(truth["pixels"].mean()))
    assert stats["png"]["length"]["max"] == max(len(v) for v in truth["png"])


def test_stats_are_mrecord_stats(client: TestClient, gallery: Path) -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["stats", str(gallery), "--json", "--label", "label", "-q"])
    assert result.exit_code == 0, result.output
    cli_fields = json.loads(result.output)["fields"]
    api_fields = client.get("/api/datasets/gallery/stats").json()["fields"]
    for name in ("pixels", "label", "score", "png", "name"):
        assert api_fields[name] == cli_fields[name]


@pytest.mark.parametrize("column", ["png", "pixels"])
def test_thumbnail_is_a_capped_png_of_the_picture(
    client: TestClient, truth: dict[str, Any], column: str
) -> None:
    response = client.get(f"/api/datasets/gallery/rows/4/{column}.png?size=24")
    assert response.status_code == 200 and response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content))
    assert image.format == "PNG" and max(image.size) == 24
    # The thumbnail's colour is the picture's (same mean colour within rounding).
    got = np.asarray(image.convert("RGB"), dtype=np.float64).mean(axis=(0, 1))
    want = truth["pixels"][4].astype(np.float64).mean(axis=(0, 1))
    assert np.allclose(got, want, atol=12)
    huge = client.get(f"/api/datasets/gallery/rows/4/{column}.png?size=100000")
    assert max(Image.open(io.BytesIO(huge.content)).size) <= SIZE  # never upscaled past the cap
    again = client.get(f"/api/datasets/gallery/rows/4/{column}.png?size=24")
    assert again.content == response.content


def test_thumbnail_of_a_non_image_column_is_415(client: TestClient) -> None:
    _error(client.get("/api/datasets/gallery/rows/0/name.png"), "not_an_image")


@pytest.mark.parametrize("row_id", ["-1", "abc", str(ROWS), "9" * 30, "1.5"])
def test_thumbnail_bad_ids_are_400(client: TestClient, row_id: str) -> None:
    _error(client.get(f"/api/datasets/gallery/rows/{row_id}/png.png"), "bad_ids")


# -- the binary block endpoint --------------------------------------------------------------------


def test_blocks_return_the_asked_rows_in_order(client: TestClient, truth: dict[str, Any]) -> None:
    ids = np.array([9, 2, 2, 59, 0], dtype=np.int64)
    response = client.post(
        "/api/datasets/gallery/blocks", content=encode_request(ids, ["png", "pixels", "name"])
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-mrecord-block"
    rows, cols = decode_block(bytearray(response.content))
    assert rows == 5 and list(cols) == ["png", "pixels", "name"]
    assert np.array_equal(cols["pixels"], truth["pixels"][ids])
    assert [bytes(v) for v in cols["png"]] == [truth["png"][i] for i in ids]
    assert cols["name"] == [truth["name"][i] for i in ids]


@pytest.mark.parametrize("ids", [[-1], [ROWS], [0, 2**62]])
def test_blocks_out_of_range_ids_are_400(client: TestClient, ids: list[int]) -> None:
    body = encode_request(np.array(ids, dtype=np.int64), None)
    _error(client.post("/api/datasets/gallery/blocks", content=body), "bad_ids")


@pytest.mark.parametrize(
    "body",
    [
        b"not msgpack at all \xff\xff",
        msgpack.packb({"ids": b"\x00" * 7}),
        msgpack.packb({"ids": [1, 2, 3]}),
        msgpack.packb({"ids": b"\x00" * 8, "columns": "label"}),
        msgpack.packb([1, 2]),
    ],
)
def test_blocks_malformed_requests_are_400(client: TestClient, body: bytes) -> None:
    _error(client.post("/api/datasets/gallery/blocks", content=body), "bad_request")


def test_blocks_too_many_ids_or_too_big_a_body_is_refused(client: TestClient) -> None:
    many = encode_request(np.zeros(1001, dtype=np.int64), ["label"])
    _error(client.post("/api/datasets/gallery/blocks", content=many), "bad_request")
    big = b"\x00" * 20_000
    _error(client.post("/api/datasets/gallery/blocks", content=big), "too_large")


def test_blocks_too_many_bytes_is_413(served: dict[str, ServedDataset]) -> None:
    limits = Limits(max_block_bytes=SIZE * SIZE * 3 * 10)
    with TestClient(create_app(served, limits=limits), base_url=BASE) as c:
        body = encode_request(np.arange(20, dtype=np.int64), ["pixels"])
        message = _error(c.post("/api/datasets/gallery/blocks", content=body), "too_large")
        assert "fewer ids" in message
        five = encode_request(np.arange(5), ["pixels"])
        ok = c.post("/api/datasets/gallery/blocks", content=five)
        assert ok.status_code == 200


# -- names, paths and methods ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/datasets/nope",
        "/api/datasets/gallery.mrecord0/rows",
        "/api/datasets/..%2F..%2Fetc%2Fpasswd/rows",
        "/api/datasets/%2Fetc%2Fpasswd/rows",
        "/api/datasets/%252e%252e%252fetc/stats",
    ],
)
def test_unknown_names_and_encoded_paths_are_404(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] in ("unknown_dataset", "not_found")
    assert "root:" not in response.text


def test_the_dataset_path_itself_is_not_a_name(client: TestClient, gallery: Path) -> None:
    response = client.get("/api/datasets/" + str(gallery).replace("/", "%2F"))
    assert response.status_code == 404


@pytest.mark.parametrize(
    "name", ["..%2Fapp.py", "%2E%2E%2Fregistry.py", "app.py", "..%2F..%2Fpyproject.toml", "x.js"]
)
def test_static_serves_only_the_page_files(client: TestClient, name: str) -> None:
    response = client.get(f"/static/{name}")
    assert response.status_code == 404
    assert "import" not in response.text


def test_page_and_static_files_are_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "<title>mrecord datasets</title>" in page.text
    assert "http" not in page.text.replace("http://www.w3.org", "")  # no CDN: offline
    script = client.get("/static/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert "script-src 'self'" in page.headers["content-security-policy"]


def test_writes_are_not_allowed(client: TestClient) -> None:
    for method in ("PUT", "DELETE", "PATCH"):
        _error(client.request(method, "/api/datasets/gallery"), "method_not_allowed")
    _error(client.post("/api/datasets/gallery/rows"), "method_not_allowed")


# -- token and host -------------------------------------------------------------------------------


def test_token_is_required_on_the_api_only(served: dict[str, ServedDataset]) -> None:
    with TestClient(create_app(served, token="s3cret"), base_url="http://data-host:8750") as c:
        _error(c.get("/api/datasets"), "unauthorized")
        _error(c.get("/api/datasets", headers={"Authorization": "Bearer wrong"}), "unauthorized")
        _error(c.get("/api/datasets", headers={"Authorization": "Basic s3cret"}), "unauthorized")
        _error(c.get("/api/datasets", headers={"Authorization": "Bearer s3cre"}), "unauthorized")
        body = encode_request(np.arange(2), ["label"])
        _error(c.post("/api/datasets/gallery/blocks", content=body), "unauthorized")
        good = {"Authorization": "Bearer s3cret"}
        assert c.get("/api/datasets", headers=good).status_code == 200
        assert c.post("/api/datasets/gallery/blocks", content=body, headers=good).status_code == 200
        assert c.get("/").status_code == 200  # the page itself holds no data


def test_without_token_only_loopback_host_names_are_answered(
    served: dict[str, ServedDataset],
) -> None:
    with TestClient(create_app(served), base_url="http://evil.example:8750") as c:
        _error(c.get("/api/datasets"), "forbidden_host")
    for base in ("http://localhost:8750", "http://127.0.0.1:1", "http://[::1]:8750"):
        with TestClient(create_app(served), base_url=base) as c:
            assert c.get("/api/datasets").status_code == 200


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.7", "::", "data-host.example"])
def test_non_loopback_bind_needs_a_token(host: str) -> None:
    with pytest.raises(ArgumentError, match="--token"):
        check_bind(host, None)
    check_bind(host, "s3cret")


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
def test_loopback_bind_needs_no_token(host: str) -> None:
    check_bind(host, None)


def test_cli_refuses_a_public_bind_without_token(gallery: Path) -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["serve", str(gallery), "--host", "0.0.0.0"], env={})
    assert result.exit_code == 2
    assert "--token" in result.output


def test_dataset_arguments_are_names_not_paths(tmp_path: Path) -> None:
    assert parse_dataset_args(["/data/train.mrecord0", "val=/x/v.mrecord"]) == {
        "train": Path("/data/train.mrecord0"),
        "val": Path("/x/v.mrecord"),
    }
    for bad in (["../x=/a"], ["a/b=/a"], ["a=/x", "a=/y"], []):
        with pytest.raises(ArgumentError):
            parse_dataset_args(bad)


# -- damage ---------------------------------------------------------------------------------------


def test_a_corrupt_page_is_500_with_the_corrupt_file_text(gallery: Path, tmp_path: Path) -> None:
    for f in gallery.parent.glob("gallery.mrecord*"):
        if not f.name.endswith("-lock"):
            shutil.copy(f, tmp_path / f.name)
    first = tmp_path / gallery.name
    with ShardFile(first) as shard:
        # pixels: a chunk too big for a copy in the head index (format 1.4), which a small
        # label chunk has (and a read of it takes that intact copy)
        col = shard.field_index("pixels")
        chunk = shard.meta.chunks[0, col]
        offset = int(chunk["offset"]) + int(chunk["length"]) // 2
    data = bytearray(first.read_bytes())
    data[offset] ^= 0xFF
    first.write_bytes(bytes(data))
    datasets = open_datasets({"bad": first})
    try:
        with TestClient(create_app(datasets), base_url=BASE) as c:
            message = _error(c.get("/api/datasets/bad/rows?start=0&stop=5"), "corrupt_file")
            assert "gallery.mrecord0" in message and "checksum" in message.lower()
            assert str(tmp_path) not in message
            body = encode_request(np.arange(3), ["pixels"])
            _error(c.post("/api/datasets/bad/blocks", content=body), "corrupt_file")
            verify = _verify_result(c, "bad")
            assert verify["ok"] is False and verify["problems"]
            assert str(tmp_path) not in str(verify["problems"])
            # other columns of the same rows still read
            ok = c.get("/api/datasets/bad/rows?start=0&stop=5&columns=name")
            assert ok.status_code == 200
    finally:
        for ds in datasets.values():
            ds.close()


def test_cli_names_a_missing_dataset_or_a_bad_name(tmp_path: Path) -> None:
    from click.testing import CliRunner

    missing = CliRunner().invoke(cli, ["serve", str(tmp_path / "nope.mrecord0")], env={})
    assert missing.exit_code == 3 and "nope.mrecord0" in missing.output
    bad = CliRunner().invoke(cli, ["serve", f"../x={tmp_path / 'a'}"], env={})
    assert bad.exit_code == 2 and "NAME=PATH" in bad.output


# -- answers bounded by their real bytes -----------------------------------------------------------

LOPSIDED_ROWS = 100
BIG_IDS = (7, 8, 9)
"""Rows of ``lopsided`` whose blob is 1 MiB; every other blob is 10 bytes."""


@pytest.fixture(scope="module")
def lopsided(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServedDataset]]:
    """Rows whose sizes differ by five orders of magnitude: the mean row says little."""
    path = tmp_path_factory.mktemp("lopsided") / "lopsided.mrecord"
    with FileWriter(path, overwrite=True) as writer:
        writer.add_schema({"blob": {"type": "bytes"}, "id": {"type": "int64"}})
        writer.write_raw_data(
            {
                "blob": [bytes([i]) * (1 << 20 if i in BIG_IDS else 10) for i in range(100)],
                "id": np.arange(LOPSIDED_ROWS, dtype=np.int64),
            }
        )
    datasets = open_datasets({"lop": path})
    yield datasets
    for ds in datasets.values():
        ds.close()


def test_a_block_is_bounded_by_its_real_bytes(lopsided: dict[str, ServedDataset]) -> None:
    limits = Limits(max_block_bytes=4 << 20)
    with TestClient(create_app(lopsided, limits=limits), base_url=BASE) as c:
        small = encode_request(np.array([1, 2, 3] * 100, dtype=np.int64), None)
        assert c.post("/api/datasets/lop/blocks", content=small).status_code == 200
        big = encode_request(np.array([7] * 8, dtype=np.int64), None)  # 8 MiB of values
        response = c.post("/api/datasets/lop/blocks", content=big)
        message = _error(response, "too_large")
        assert "fewer ids" in message
        assert len(response.content) < 4096


def test_a_rows_page_is_bounded_by_its_real_bytes(lopsided: dict[str, ServedDataset]) -> None:
    limit = 2 << 20
    limits = Limits(max_page_bytes=limit)
    with TestClient(create_app(lopsided, limits=limits), base_url=BASE) as c:
        seen: list[int] = []
        start = 0
        while start < LOPSIDED_ROWS:
            response = c.get(f"/api/datasets/lop/rows?start={start}&stop={LOPSIDED_ROWS}")
            assert response.status_code == 200, response.text
            assert len(response.content) <= limit
            body = response.json()
            assert body["stop"] > start  # every page moves on
            seen += [row["id"] for row in body["rows"]]
            start = body["stop"]
        assert seen == list(range(LOPSIDED_ROWS))  # nothing skipped, in order
        summary = c.get(f"/api/datasets/lop/rows?start=0&stop={LOPSIDED_ROWS}&view=summary")
        assert len(summary.content) <= limit
        rows = summary.json()["rows"]
        assert [r["values"]["blob"] for r in rows[7:10]] == [{"bytes": 1 << 20}] * 3


def test_a_row_bigger_than_a_page_is_413_in_full_and_shown_in_summary(
    lopsided: dict[str, ServedDataset],
) -> None:
    limits = Limits(max_page_bytes=512 << 10)
    with TestClient(create_app(lopsided, limits=limits), base_url=BASE) as c:
        message = _error(c.get("/api/datasets/lop/rows?start=7&stop=8"), "too_large")
        assert "view=summary" in message
        summary = c.get("/api/datasets/lop/rows?start=7&stop=8&view=summary").json()
        assert summary["rows"][0]["values"]["blob"] == {"bytes": 1 << 20}


# -- search answers from the served generation -----------------------------------------------------


def test_search_after_an_append_answers_from_the_served_generation(tmp_path: Path) -> None:
    path = tmp_path / "grow.mrecord"
    with FileWriter(path, shard_num=2, overwrite=True) as writer:
        writer.add_schema({"label": {"type": "int32"}, "id": {"type": "int64"}})
        writer.add_index(["label"])
        writer.write_raw_data(
            {"label": np.arange(40, dtype=np.int32) % 4, "id": np.arange(40, dtype=np.int64)}
        )
    first = Path(str(path) + "0")
    datasets = open_datasets({"g": first})
    try:
        with TestClient(create_app(datasets), base_url=BASE) as c:
            appender = FileWriter.open_for_append(first)
            appender.write_raw_data(
                {
                    "label": np.full(40, 1, dtype=np.int32),
                    "id": np.arange(1000, 1040, dtype=np.int64),
                }
            )
            appender.commit()
            body = c.get("/api/datasets/g/search?field=label&value=1&num_row=100").json()
            assert body["total"] == 10, body
            assert sorted(r["values"]["id"] for r in body["rows"]) == list(range(1, 40, 4))
            assert all(r["values"]["label"] == 1 for r in body["rows"])
    finally:
        for ds in datasets.values():
            ds.close()
