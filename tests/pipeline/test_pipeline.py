"""The dataset graph: reference cases, size arithmetic, column flow, the tree rule, ops."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord import config
from mrecord.errors import ArgumentError, OperationError, PipelineError
from mrecord.pipeline import Dataset, GeneratorDataset, NumpySlicesDataset, zip

CASES = json.loads((Path(__file__).parents[1] / "cases" / "pipeline_cases.json").read_text())


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    config.reset()


def ids_dataset(n: int, start: int = 0) -> NumpySlicesDataset:
    """The reference rows: id = start + i (int64), cls = id % 3 (int32), stored order."""
    ids = np.arange(start, start + n, dtype=np.int64)
    return NumpySlicesDataset({"id": ids, "cls": (ids % 3).astype(np.int32)}, shuffle=False)


def column(ds: Dataset, name: str = "id") -> list[Any]:
    return [row[name].tolist() for row in ds.create_dict_iterator(num_epochs=1)]


# ------------------------------------------------------------------ reference cases
@pytest.mark.parametrize("case", [c for c in CASES if c["name"] == "batch"], ids=str)
def test_batch_matches_mindspore(case: dict[str, Any]) -> None:
    args = case["args"]
    ds = ids_dataset(args["n"]).batch(args["batch_size"], drop_remainder=args["drop_remainder"])
    assert column(ds) == case["expect"]
    assert ds.get_dataset_size() == len(case["expect"])


@pytest.mark.parametrize("case", [c for c in CASES if c["name"] == "skip_take"], ids=str)
def test_skip_take_matches_mindspore(case: dict[str, Any]) -> None:
    args = case["args"]
    ds = ids_dataset(args["n"]).skip(args["skip"]).take(args["take"])
    assert column(ds) == case["expect"]
    assert ds.get_dataset_size() == len(case["expect"])


# ------------------------------------------------------------------ size arithmetic
OPS = st.one_of(
    st.tuples(st.just("batch"), st.integers(1, 7), st.booleans()),
    st.tuples(st.just("repeat"), st.integers(1, 3), st.just(False)),
    st.tuples(st.just("skip"), st.integers(0, 12), st.just(False)),
    st.tuples(st.just("take"), st.integers(1, 12), st.just(False)),
    st.tuples(st.just("shuffle"), st.integers(2, 9), st.just(False)),
)


@given(n=st.integers(0, 40), ops=st.lists(OPS, max_size=4))
def test_size_without_reading_equals_rows_produced(
    n: int, ops: list[tuple[str, int, bool]]
) -> None:
    ds: Dataset = ids_dataset(n)
    expected = n  # independent model of the arithmetic
    ragged = False  # a kept short batch makes rows of two shapes: batching again must fail
    for name, value, flag in ops:
        if name == "batch":
            if ragged:
                continue
            ds = ds.batch(value, drop_remainder=flag)
            expected = expected // value if flag else -(-expected // value)
            ragged = not flag
        elif name == "repeat":
            ds, expected = ds.repeat(value), expected * value
        elif name == "skip":
            ds, expected = ds.skip(value), max(expected - value, 0)
        elif name == "take":
            ds, expected = ds.take(value), min(expected, value)
        else:
            ds = ds.shuffle(value)
    assert ds.get_dataset_size() == expected
    assert sum(1 for _ in ds.create_tuple_iterator(num_epochs=1)) == expected


def test_filter_size_needs_a_pass_and_is_exact() -> None:
    ds = ids_dataset(30).filter(lambda i: i % 4 == 0, input_columns=["id"]).batch(3)
    assert ds.get_dataset_size() == 3  # 8 rows kept -> 3 batches
    assert column(ds) == [[0, 4, 8], [12, 16, 20], [24, 28]]


def test_repeat_forever_reports_one_pass_and_take_bounds_it() -> None:
    ds = ids_dataset(4).repeat()
    assert ds.get_dataset_size() == 4  # MindSpore's value (was -1 before issue 17)
    assert ds.get_repeat_count() == -1
    assert column(ds.take(10)) == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert ds.take(10).get_dataset_size() == 10


def test_batch_size_and_repeat_count_of_nearest_node() -> None:
    ds = ids_dataset(10).batch(4).repeat(3)
    assert ds.get_batch_size() == 4
    assert ds.get_repeat_count() == 3
    assert ids_dataset(3).get_batch_size() == 1
    assert ids_dataset(3).get_repeat_count() == 1


# ------------------------------------------------------------------ column flow
def test_map_in_place_keeps_column_order() -> None:
    ds = ids_dataset(3).map(lambda c: c * 10, input_columns="cls")
    assert ds.get_col_names() == ["id", "cls"]
    assert column(ds, "cls") == [0, 10, 20]


def test_map_defaults_to_the_first_column() -> None:
    ds = ids_dataset(3).map(lambda x: x + 100)
    assert column(ds, "id") == [100, 101, 102]


def test_faq_merge_two_columns_into_one() -> None:
    data = np.arange(12, dtype=np.int64).reshape(3, 2, 2)
    data2 = np.arange(9, dtype=np.int64).reshape(3, 3) + 100
    ds = NumpySlicesDataset({"label": np.arange(3), "data": data, "data2": data2}, shuffle=False)

    def combine(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.append(x.flatten(), y.flatten())

    merged = ds.map(combine, input_columns=["data", "data2"], output_columns=["data"])
    # MindSpore's rule: fewer outputs than inputs -> outputs first, then the other columns.
    assert merged.get_col_names() == ["data", "label"]
    rows = list(merged.create_dict_iterator(num_epochs=1))
    assert rows[1]["data"].tolist() == [4, 5, 6, 7, 103, 104, 105]
    assert rows[1]["label"].item() == 1


def test_one_column_into_n_patches() -> None:
    images = np.arange(2 * 4 * 4, dtype=np.uint8).reshape(2, 4, 4)
    ds = NumpySlicesDataset({"image": images, "label": np.array([7, 8])}, shuffle=False)

    def quarters(img: np.ndarray) -> list[np.ndarray]:
        return [img[:2, :2], img[:2, 2:], img[2:, :2], img[2:, 2:]]

    names = [f"patch{i}" for i in range(4)]
    out = ds.map(quarters, input_columns="image", output_columns=names)
    assert out.get_col_names() == [*names, "label"]
    row = next(iter(out.create_dict_iterator(num_epochs=1)))
    assert row["patch3"].tolist() == [[10, 11], [14, 15]]
    assert out.project(["patch1"]).output_shapes() == [[2, 2]]


def test_map_list_of_ops_applies_in_order() -> None:
    ds = ids_dataset(3).map([lambda x: x + 1, lambda x: x * 10], input_columns="id")
    assert column(ds) == [10, 20, 30]


def test_map_wrong_number_of_outputs_is_an_error() -> None:
    ds = ids_dataset(3).map(lambda x: (x, x), input_columns="id")
    with pytest.raises(PipelineError, match="output_columns"):
        column(ds)


def test_project_rename_and_their_errors() -> None:
    ds = ids_dataset(2).rename("id", "x").project(["cls", "x"])
    assert ds.get_col_names() == ["cls", "x"]
    assert [row for row in ds] == [[0, 0], [1, 1]]
    with pytest.raises(PipelineError, match="'nope'"):
        ids_dataset(2).project(["nope"]).get_col_names()
    with pytest.raises(PipelineError, match="duplicate"):
        ids_dataset(2).rename("id", "cls").get_col_names()
    with pytest.raises(ArgumentError):
        ids_dataset(2).rename(["id", "cls"], ["a"])


def test_output_shapes_and_types_of_first_batch() -> None:
    ds = ids_dataset(10).map(lambda x: np.full((2, 3), x, dtype=np.float32), input_columns="id")
    batched = ds.batch(4)
    assert batched.output_shapes() == [[4, 2, 3], [4]]
    assert batched.output_types() == [np.dtype(np.float32), np.dtype(np.int32)]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint16])
def test_batch_of_variable_shape_rows_keeps_their_dtype(dtype: type[np.generic]) -> None:
    """Rows whose shape changes every 4 rows reach batch as a list of arrays (not one
    stacked chunk); each batch of 4 shares a shape and must stack to the rows' own dtype
    and values (a float32 column must not come out as float64)."""

    def rows() -> Iterator[tuple[np.ndarray]]:
        for i in range(16):
            yield (np.arange(i // 4 + 1).astype(dtype) + i % 4,)

    batches = [
        b["x"] for b in GeneratorDataset(rows, ["x"]).batch(4).create_dict_iterator(num_epochs=1)
    ]
    assert [b.dtype for b in batches] == [np.dtype(dtype)] * 4
    for k, got in enumerate(batches):
        expected = np.stack([np.arange(k + 1).astype(dtype) + j for j in range(4)])
        np.testing.assert_array_equal(got, expected)


def test_batch_of_different_shapes_names_the_column() -> None:
    ds = ids_dataset(4).map(lambda x: np.zeros(int(x) + 1), input_columns="id").batch(2)
    with pytest.raises(PipelineError, match=r"Inconsistent batch shapes.*'id'"):
        column(ds)


def test_per_batch_map_gets_lists_and_batch_info() -> None:
    seen: list[tuple[int, int]] = []

    def add_batch_num(ids: list[Any], cls: list[Any], info: Any) -> tuple[list[Any], list[Any]]:
        seen.append((info.get_batch_num(), info.get_epoch_num()))
        return [i + 1000 * info.get_batch_num() for i in ids], cls

    ds = ids_dataset(5).batch(2, per_batch_map=add_batch_num, num_parallel_workers=2)
    assert column(ds) == [[0, 1], [1002, 1003], [2004]]
    assert sorted(seen) == [(0, 0), (1, 0), (2, 0)]


def test_concat_and_plus() -> None:
    ds = ids_dataset(2) + ids_dataset(3, start=10)
    assert column(ds) == [0, 1, 10, 11, 12]
    assert ds.get_dataset_size() == 5
    three = ids_dataset(1).concat([ids_dataset(1, start=5), ids_dataset(1, start=9)])
    assert column(three) == [0, 5, 9]
    with pytest.raises(PipelineError, match="same columns"):
        (ids_dataset(2) + ids_dataset(2).project("id")).get_col_names()


def test_zip_aligns_rows_and_stops_at_shortest() -> None:
    a = ids_dataset(150)  # blocks of 64 rows
    b = GeneratorDataset(((np.int64(i * 2),) for i in range(100)), ["double"])
    zipped = zip((a, b))
    rows = list(zipped.create_dict_iterator(num_epochs=1))
    assert len(rows) == 100
    assert all(r["double"].item() == 2 * r["id"].item() for r in rows)
    assert zipped.get_col_names() == ["id", "cls", "double"]
    with pytest.raises(PipelineError, match="duplicate column names"):
        ids_dataset(2).zip(ids_dataset(2)).get_col_names()


# ------------------------------------------------------------------ the tree rule
def test_node_with_two_consumers_is_rejected_naming_both() -> None:
    source = ids_dataset(4)
    left = source.map(lambda x: x + 1, input_columns="id")
    right = source.map(lambda x: x - 1, input_columns="id")
    message = r"not a tree \(i\.e\., one node has 2 consumers\)"
    with pytest.raises(PipelineError, match=message) as e:
        list(right.create_tuple_iterator(num_epochs=1))
    assert "x + 1" not in str(e.value)  # reprs, not source text
    assert str(e.value).count("Map(") == 2
    del left


def test_zip_of_a_dataset_with_itself_is_not_a_tree() -> None:
    source = ids_dataset(4)
    with pytest.raises(PipelineError, match="not a tree"):
        source.zip(source).get_dataset_size()


def test_discarded_branch_does_not_count() -> None:
    source = ids_dataset(3)
    source.map(lambda x: x + 1, input_columns="id")  # never kept
    gc.collect()
    kept = source.map(lambda x: x * 2, input_columns="id")
    assert column(kept) == [0, 2, 4]


# ------------------------------------------------------------------ shuffle, epochs
def test_shuffle_is_a_permutation_reproducible_and_new_each_epoch() -> None:
    config.set_seed(7)
    ds = ids_dataset(300).shuffle(50)
    it = ds.create_tuple_iterator(num_epochs=2)
    first = [int(r[0]) for r in it]
    second = [int(r[0]) for r in it]
    assert sorted(first) == list(range(300)) == sorted(second)
    assert first != list(range(300))
    assert first != second
    config.set_seed(7)
    assert [int(r[0]) for r in ds.create_tuple_iterator(num_epochs=1)] == first


def test_shuffle_buffer_limits_how_far_rows_move_forward() -> None:
    out = column(ids_dataset(500).shuffle(10))
    # a row can only leave after it entered: row i comes out no earlier than position i - 10
    assert all(pos >= value - 10 for pos, value in enumerate(out))


def test_repeat_reshuffles_each_repetition() -> None:
    ds = ids_dataset(40).shuffle(40).repeat(2)
    out = column(ds)
    assert sorted(out[:40]) == sorted(out[40:]) == list(range(40))
    assert out[:40] != out[40:]


def test_iterator_runs_one_epoch_per_loop_then_ends() -> None:
    it = ids_dataset(3).create_dict_iterator(num_epochs=2)
    assert [r["id"].item() for r in it] == [0, 1, 2]
    assert [r["id"].item() for r in it] == [0, 1, 2]
    with pytest.raises(PipelineError, match="num_epochs=2"):  # MindSpore raises too
        list(it)


def test_tuple_iterator_columns_pick_and_order() -> None:
    it = ids_dataset(2).create_tuple_iterator(columns=["cls", "id"], num_epochs=1)
    assert [[v.tolist() for v in row] for row in it] == [[0, 0], [1, 1]]
    with pytest.raises(ArgumentError, match="nope"):
        ids_dataset(2).create_tuple_iterator(columns=["nope"])


def test_values_are_numpy_bytes_become_uint8() -> None:
    ds = GeneratorDataset([(b"ab\x00", "s", 3)], ["b", "s", "n"], shuffle=False)
    row = next(iter(ds.create_dict_iterator(num_epochs=1)))
    assert row["b"].dtype == np.uint8 and row["b"].tolist() == [97, 98, 0]
    assert isinstance(row["s"], np.ndarray) and row["s"].item() == "s"
    assert isinstance(row["n"], np.ndarray) and row["n"].item() == 3


def test_filter_error_names_predicate_and_row() -> None:
    def picky(i: np.ndarray) -> bool:
        if int(i) == 3:
            raise KeyError("three")
        return True

    with pytest.raises(OperationError, match=r"picky.*\['id'\].*row id 3") as e:
        column(ids_dataset(6).filter(picky, input_columns=["id"]))
    assert isinstance(e.value.__cause__, KeyError)


def test_bad_arguments_are_typed() -> None:
    ds = ids_dataset(3)
    with pytest.raises(ValueError):
        ds.batch(0)
    with pytest.raises(TypeError):
        ds.batch(2, drop_remainder=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ds.repeat(0)
    with pytest.raises(ValueError):
        ds.take(0)
    with pytest.raises(ValueError):
        ds.skip(-1)
    with pytest.raises(ValueError):
        ds.shuffle(1)
    with pytest.raises(ValueError):
        ds.map(lambda x: x, num_parallel_workers=0)
    with pytest.raises(ArgumentError):
        ds.create_dict_iterator(num_epochs=0)
