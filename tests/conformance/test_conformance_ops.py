"""Issue 17, dataset operations: zip, split, flat_map, apply, batching by size and bucket,
samplers, generator schemas, MindPage, TypeCast.

Every expected value comes from ``tests/cases/conformance_cases.json``, written by
``tools/gen_conformance_cases.py`` running real MindSpore 2.10. Where mrecord departs on
purpose (docs/MINDSPORE_DIFFERENCES.md), the test says so and asserts mrecord's behaviour.
"""


from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord
from mrecord import FileWriter, GeneratorDataset, MindDataset, config
from mrecord import transforms as T
from tests.conformance.helpers import (
    cases,
    expected_array,
    gen_rows,
    one,
)


# ----------------------------------------------------------------------------- dataset names
def ids_of(ds: mrecord.Dataset) -> list[int]:
    return [
        int(np.asarray(r[0]).reshape(-1)[0])
        for r in ds.create_tuple_iterator(num_epochs=1, output_numpy=True)
    ]


def rows_ds(n: int, col: str = "x") -> GeneratorDataset:
    return GeneratorDataset(gen_rows(n), [col], shuffle=False)


def test_module_level_zip() -> None:
    names, size = one("zip_module")["expect"]
    zipped = mrecord.zip((rows_ds(3, "a"), rows_ds(4, "b")))
    assert zipped.get_col_names() == names
    assert zipped.get_dataset_size() == size


@pytest.mark.parametrize("case", cases("split"), ids=lambda c: json.dumps(c["args"]))
def test_split_matches_mindspore(case: dict[str, Any]) -> None:
    source = GeneratorDataset(list(gen_rows(case["args"]["n"])()), ["x"], shuffle=False)
    if "error" in case:
        assert case["error"] == "RuntimeError"
        with pytest.raises(RuntimeError, match=case["message"].split(" is ")[0]):
            source.split(case["args"]["sizes"], randomize=False)
        return
    parts = source.split(case["args"]["sizes"], randomize=False)
    assert [ids_of(p) for p in parts] == case["expect"]
    assert [p.get_dataset_size() for p in parts] == [len(e) for e in case["expect"]]


def test_split_randomized_parts_cover_the_rows_once() -> None:
    config.set_seed(5)
    source = GeneratorDataset(list(gen_rows(20)()), ["x"], shuffle=False)
    parts = [ids_of(p) for p in source.split([0.5, 0.25, 0.25])]
    assert [len(p) for p in parts] == [10, 5, 5]
    assert sorted(i for p in parts for i in p) == list(range(20))
    assert parts[0] != list(range(10))  # rows were assigned at random


def test_flat_map_matches_mindspore() -> None:
    names, expect = one("flat_map")["expect"]

    def twice(x: np.ndarray) -> mrecord.Dataset:
        value = int(np.asarray(x).reshape(-1)[0])
        return GeneratorDataset([(np.array([value], np.int64),)] * 2, ["y"], shuffle=False)

    ds = rows_ds(3).flat_map(twice)
    assert ds.get_col_names() == names
    assert ids_of(ds) == expect


def test_apply_matches_mindspore() -> None:
    size, batches = one("apply")["expect"]
    ds = rows_ds(5).apply(lambda d: d.batch(2))
    assert ds.get_dataset_size() == size
    got = [np.asarray(r[0]).reshape(-1).tolist() for r in ds.create_tuple_iterator(num_epochs=1)]
    assert got == batches
    with pytest.raises(TypeError, match="must return a Dataset"):
        rows_ds(2).apply(lambda d: 3)  # type: ignore[arg-type,return-value]


def test_batch_size_callable_matches_mindspore() -> None:
    ds = rows_ds(10).batch(batch_size=lambda info: info.get_batch_num() + 1)
    got = [np.asarray(r[0]).reshape(-1).tolist() for r in ds.create_tuple_iterator(num_epochs=1)]
    assert got == one("batch_callable")["expect"]
    assert ds.get_dataset_size() == 4  # counted with a pass


def _seqs() -> Iterator[tuple[np.ndarray]]:
    for n in (1, 3, 2, 5, 1, 4, 2, 6):
        yield (np.arange(n, dtype=np.int32),)


@pytest.mark.parametrize(
    "case", cases("bucket_batch_by_length"), ids=lambda c: json.dumps(c["args"])
)
def test_bucket_batch_by_length_matches_mindspore(case: dict[str, Any]) -> None:
    a = case["args"]
    ds = GeneratorDataset(_seqs, ["s"], shuffle=False).bucket_batch_by_length(
        ["s"],
        a["boundaries"],
        a["sizes"],
        pad_to_bucket_boundary=a["pad_to_bucket_boundary"],
        drop_remainder=a["drop_remainder"],
    )
    got = [np.asarray(r[0]).tolist() for r in ds.create_tuple_iterator(num_epochs=1)]
    assert got == case["expect"]


def test_bucket_batch_with_length_function_and_pad_info() -> None:
    def seqs() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for n in (1, 3, 2, 5):
            yield (np.arange(n, dtype=np.int32), np.array(n, dtype=np.int32))

    ds = GeneratorDataset(seqs, ["s", "n"], shuffle=False).bucket_batch_by_length(
        ["n"], [3], [2, 2], element_length_function=lambda n: int(n), pad_info={"s": ([None], -1)}
    )
    got = [[np.asarray(v).tolist() for v in r] for r in ds.create_tuple_iterator(num_epochs=1)]
    assert got == one("bucket_batch_by_length_fn")["expect"]


def test_add_sampler_matches_mindspore() -> None:
    size, expect = one("add_sampler")["expect"]
    ds = GeneratorDataset([(np.array([i], np.int64),) for i in range(10)], ["x"], shuffle=False)
    ds.add_sampler(mrecord.DistributedSampler(2, 1, shuffle=False))
    assert ds.get_dataset_size() == size
    assert ids_of(ds) == expect


def test_add_sampler_on_minddataset(mixed: str) -> None:
    ds = MindDataset(mixed, shuffle=False)
    ds.add_sampler(mrecord.DistributedSampler(2, 1, shuffle=False))
    assert ds.get_dataset_size() == 2
    assert [int(r["id"]) for r in ds.create_dict_iterator(num_epochs=1)] == [1, 3]


def test_num_classes_and_shuffle_false() -> None:
    assert rows_ds(3).num_classes() == one("num_classes")["expect"]
    assert mrecord.Shuffle.FALSE.value == "false"
    order = MindDatasetIds.of(shuffle=mrecord.Shuffle.FALSE)
    assert order == sorted(order)


class MindDatasetIds:
    """Ids of a small MindDataset written on demand."""

    path: str | None = None

    @classmethod
    def of(cls, **kwargs: Any) -> list[int]:
        import tempfile

        if cls.path is None:
            folder = tempfile.mkdtemp(prefix="mrecord-i17-")
            with FileWriter(Path(folder) / "ids.mrecord", shard_num=1) as writer:
                writer.add_schema({"id": {"type": "int64"}})
                writer.write_raw_data({"id": np.arange(12)})
            cls.path = str(writer.files[0])
        ds = MindDataset(cls.path, **kwargs)
        return [int(r["id"]) for r in ds.create_dict_iterator(num_epochs=1)]


def test_generator_schema_matches_mindspore() -> None:
    names, expect = one("generator_schema")["expect"]
    schema = mrecord.Schema()
    schema.add_column("a", de_type=mrecord.int64, shape=[1])
    ds = GeneratorDataset(gen_rows(3), schema=schema, shuffle=False)
    assert ds.get_col_names() == names
    assert ids_of(ds) == expect


def test_generator_python_multiprocessing_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match=r"python_multiprocessing=True\) is not supported"):
        GeneratorDataset(list(gen_rows(3)()), ["x"], num_parallel_workers=2,
                         python_multiprocessing=True)
    ds = GeneratorDataset(list(gen_rows(3)()), ["x"], shuffle=False, python_multiprocessing=False)
    assert ids_of(ds) == [0, 1, 2]


def test_set_header_size_is_accepted_and_checked(tmp_path: Path) -> None:
    writer = FileWriter(tmp_path / "h.mrecord", shard_num=1)
    writer.set_header_size(1 << 25)
    with pytest.raises(ValueError, match="header_size"):
        writer.set_header_size(100)
    writer.add_schema({"id": {"type": "int64"}})
    writer.write_raw_data([{"id": 1}])
    writer.commit()
    assert [int(r["id"]) for r in MindDataset(str(writer.files[0])).create_dict_iterator()] == [1]


def test_mindpage_candidate_fields_and_category_field(tmp_path: Path) -> None:
    with FileWriter(tmp_path / "p.mrecord", shard_num=1) as writer:
        writer.add_schema({"id": {"type": "int64"}, "label": {"type": "int32"}})
        writer.add_index(["label"])
        writer.write_raw_data({"id": np.arange(4), "label": np.array([0, 1, 0, 1], np.int32)})
    page = mrecord.MindPage(str(writer.files[0]))
    assert page.candidate_fields == ["label"]
    assert page.category_field is None
    page.category_field = "label"
    assert page.category_field == "label"
    assert [int(r["id"]) for r in page.read_at_page_by_name(1, 0, 10)] == [1, 3]
    with pytest.raises(ValueError, match="nope"):
        page.category_field = "nope"
    page.close()


def test_type_cast_with_dtype_names() -> None:
    case = one("vision_type_cast_mstype")
    out = T.TypeCast(mrecord.int32)(np.array([1.7, -2.2]))
    np.testing.assert_array_equal(out, expected_array(case["expect"]))
    assert out.dtype == expected_array(case["expect"]).dtype
    assert mrecord.mstype.float32 is mrecord.float32
