"""MindPage: categories and pages served from the .db indexes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import FileWriter, MindPage
from mrecord.errors import ArgumentError

ROWS: list[dict[str, Any]] = [
    {"id": i, "label": i % 3, "name": f"n{i % 4}", "data": bytes([i])} for i in range(23)
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("page") / "p.mrecord"
    with FileWriter(path, shard_num=3) as writer:
        writer.add_schema(
            {
                "id": {"type": "int64"},
                "label": {"type": "int32"},
                "name": {"type": "string"},
                "data": {"type": "bytes"},
            }
        )
        writer.add_index(["label", "name"])
        writer.write_raw_data(ROWS[:10])
        writer.write_raw_data(ROWS[10:])
    return Path(str(path) + "1")  # any shard opens the whole dataset


def test_category_fields_are_the_indexed_fields(dataset: Path) -> None:
    assert MindPage(dataset).get_category_fields() == ["label", "name"]


def test_category_info_counts_every_value_over_all_shards(dataset: Path) -> None:
    page = MindPage(dataset)
    page.set_category_field("label")
    info = json.loads(page.read_category_info())
    assert info["category_field"] == "label"
    counts = {c["name"]: c["count"] for c in info["categories"]}
    assert counts == {0: 8, 1: 8, 2: 7}
    assert [c["id"] for c in info["categories"]] == [0, 1, 2]


def test_pages_by_name_and_by_id_hold_the_matching_rows(dataset: Path) -> None:
    page = MindPage(dataset)
    page.set_category_field("name")
    want = [r["id"] for r in ROWS if r["name"] == "n2"]
    got: list[int] = []
    for p in range(3):
        rows = page.read_at_page_by_name("n2", p, 2)
        assert len(rows) <= 2
        assert all(str(r["name"]) == "n2" for r in rows)
        got.extend(int(r["id"]) for r in rows)
    assert sorted(got) == sorted(want)
    info = json.loads(page.read_category_info())
    n2 = next(c["id"] for c in info["categories"] if c["name"] == "n2")
    by_id = page.read_at_page_by_id(n2, 0, 100)
    assert sorted(int(r["id"]) for r in by_id) == sorted(want)
    row = by_id[0]
    assert row["data"] == bytes([int(row["id"])])


def test_a_page_past_the_end_is_empty(dataset: Path) -> None:
    page = MindPage(dataset)
    page.set_category_field("label")
    assert page.read_at_page_by_name(np.int32(1), 50, 10) == []


def test_bad_arguments_are_refused(dataset: Path) -> None:
    page = MindPage(dataset)
    with pytest.raises(ArgumentError, match="set_category_field"):
        page.read_category_info()
    with pytest.raises(ArgumentError, match="not an indexed field"):
        page.set_category_field("data")
    with pytest.raises(ArgumentError, match="not an indexed field"):
        page.set_category_field('label" OR 1=1 --')
    page.set_category_field("label")
    with pytest.raises(ArgumentError, match="out of range"):
        page.read_at_page_by_id(3, 0, 1)
    with pytest.raises(ArgumentError):
        page.read_at_page_by_name(1, -1, 1)
    with pytest.raises(TypeError):
        page.read_at_page_by_name(1, 0, "2")  # type: ignore[arg-type]


def test_values_are_passed_as_parameters_not_sql(dataset: Path) -> None:
    page = MindPage(dataset)
    page.set_category_field("name")
    assert page.read_at_page_by_name("n1' OR '1'='1", 0, 100) == []
