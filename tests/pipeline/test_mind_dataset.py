"""MindDataset end to end: real files on disk, checked against MindSpore's reference cases.

Source rows are ``{"id": int64 = i, "cls": int32 = i % 3}`` written with
``shard_num=1``, exactly as in the reference (tests/cases/mindspore_cases.json).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mrecord
from mrecord import (
    Dataset,
    DistributedSampler,
    FileWriter,
    MindDataset,
    PKSampler,
    SequentialSampler,
    Shuffle,
    SubsetSampler,
    config,
)
from mrecord.errors import ArgumentError, MissingIndexError

CASES = json.loads((Path(__file__).parents[1] / "cases" / "mindspore_cases.json").read_text())


def cases(name: str) -> list[dict[str, Any]]:
    return [c for c in CASES if c["name"] == name]


@pytest.fixture(autouse=True)
def _reset_config() -> Iterator[None]:
    yield
    config.reset()


@pytest.fixture(scope="module")
def make_dataset(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    made: dict[tuple[int, int], str] = {}

    def make(n: int, shards: int = 1) -> str:
        if (n, shards) not in made:
            folder = tmp_path_factory.mktemp(f"ds{n}_{shards}")
            path = folder / "ids.mrecord"
            with FileWriter(path, shard_num=shards) as writer:
                writer.add_schema({"id": {"type": "int64"}, "cls": {"type": "int32"}})
                writer.add_index(["cls"])
                writer.write_raw_data(
                    {"id": np.arange(n), "cls": (np.arange(n) % 3).astype(np.int32)}
                )
            made[(n, shards)] = str(writer.files[0])
        return made[(n, shards)]

    return make


def ids_of(ds: mrecord.Dataset, epochs: int = 1) -> list[int]:
    """Row ids over ``epochs`` epochs (as in MindSpore, one ``for`` loop per epoch)."""
    iterator = ds.create_dict_iterator(num_epochs=epochs)
    return [int(row["id"]) for _ in range(epochs) for row in iterator]


@pytest.mark.parametrize("case", cases("shard_noshuffle"), ids=lambda c: json.dumps(c["args"]))
def test_sharding_without_shuffle_matches_mindspore(
    case: dict[str, Any], make_dataset: Any
) -> None:
    path = make_dataset(case["args"]["n"])
    k = case["args"]["num_shards"]
    got = [ids_of(MindDataset(path, shuffle=False, num_shards=k, shard_id=s)) for s in range(k)]
    assert got == case["expect"]


@pytest.mark.parametrize("case", cases("padded"), ids=lambda c: json.dumps(c["args"]))
def test_padding_matches_mindspore(case: dict[str, Any], make_dataset: Any) -> None:
    args = case["args"]
    path = make_dataset(args["n"])
    got = []
    for s in range(args["num_shards"]):
        ds = MindDataset(
            path,
            columns_list=["id", "cls"],
            shuffle=False,
            num_shards=args["num_shards"],
            shard_id=s,
            padded_sample=args["padded_sample"],
            num_padded=args["num_padded"],
        )
        assert ds.get_dataset_size() == len(case["expect"][s])
        got.append(ids_of(ds))
    assert got == case["expect"]


@pytest.mark.parametrize("case", cases("batch"), ids=lambda c: json.dumps(c["args"]))
def test_batch_matches_mindspore(case: dict[str, Any], make_dataset: Any) -> None:
    args = case["args"]
    ds = MindDataset(make_dataset(args["n"]), shuffle=False).batch(
        args["batch_size"], drop_remainder=args["drop_remainder"]
    )
    got = [b["id"].tolist() for b in ds.create_dict_iterator(num_epochs=1)]
    assert got == case["expect"]
    assert ds.get_dataset_size() == len(case["expect"])


def test_skip_take_and_num_samples_match_mindspore(make_dataset: Any) -> None:
    (st_case,) = cases("skip_take")
    a = st_case["args"]
    ds: Dataset = MindDataset(make_dataset(a["n"]), shuffle=False).skip(a["skip"]).take(a["take"])
    assert ids_of(ds) == st_case["expect"]
    (ns_case,) = cases("num_samples_noshuffle")
    ds = MindDataset(make_dataset(ns_case["args"]["n"]), shuffle=False, num_samples=4)
    assert ids_of(ds) == ns_case["expect"]


def test_samplers_match_mindspore(make_dataset: Any) -> None:
    (seq,) = cases("sequential_sampler")
    a = seq["args"]
    sampler = SequentialSampler(start_index=a["start_index"], num_samples=a["num_samples"])
    assert ids_of(MindDataset(make_dataset(a["n"]), sampler=sampler)) == seq["expect"]
    (sub,) = cases("subset_sampler")
    ds = MindDataset(make_dataset(sub["args"]["n"]), sampler=SubsetSampler(sub["args"]["indices"]))
    assert ids_of(ds) == sub["expect"]
    (child,) = cases("child_sampler")
    parent = SequentialSampler(**child["args"]["parent"])
    parent.add_child(SequentialSampler(**child["args"]["child"]))
    ds = MindDataset(make_dataset(child["args"]["n"]), sampler=parent)
    assert ids_of(ds) == child["expect"]["ids"]
    assert parent.get_num_samples() == child["expect"]["get_num_samples"]


@pytest.mark.parametrize(
    "case", [c for c in CASES if c["name"].startswith("err_")], ids=lambda c: c["name"]
)
def test_argument_errors_match_mindspore(case: dict[str, Any], make_dataset: Any) -> None:
    path = make_dataset(case["args"]["n"])
    kwargs: dict[str, Any] = {k: v for k, v in case["args"].items() if k != "n"}
    if case["name"] == "err_sampler_with_shards":
        kwargs = {"sampler": SequentialSampler(), "num_shards": 2, "shard_id": 0}
    expected = {"RuntimeError": RuntimeError, "ValueError": ValueError}[case["error"]]
    with pytest.raises(expected) as info:
        MindDataset(path, **kwargs)
    assert case["message"] in str(info.value)


def test_padding_that_does_not_divide_is_refused_with_mindspores_message(make_dataset: Any) -> None:
    path = make_dataset(12)
    with pytest.raises(
        RuntimeError, match="14 can not be divisible by the value of 'num_shards': 5"
    ):
        MindDataset(
            path,
            columns_list=["id", "cls"],
            num_shards=5,
            shard_id=0,
            padded_sample={"id": -1, "cls": 0},
            num_padded=2,
        )


def test_padded_sample_needs_columns_list_and_num_padded(make_dataset: Any) -> None:
    path = make_dataset(10)
    with pytest.raises(RuntimeError, match="columns_list"):
        MindDataset(
            path, num_shards=4, shard_id=0, padded_sample={"id": -1, "cls": 0}, num_padded=2
        )
    with pytest.raises(RuntimeError, match="num_padded"):
        MindDataset(path, columns_list=["id", "cls"], padded_sample={"id": -1, "cls": 0})
    with pytest.raises(ArgumentError, match="padded_sample does not fit"):
        MindDataset(
            path,
            columns_list=["id", "cls"],
            num_shards=4,
            shard_id=0,
            padded_sample={"id": "x", "cls": 0},
            num_padded=2,
        )


@given(
    n=st.integers(1, 60),
    files=st.integers(1, 4),
    k=st.integers(1, 6),
    mode=st.sampled_from([True, Shuffle.GLOBAL, Shuffle.FILES, Shuffle.INFILE, Shuffle.PARTIAL]),
    seed=st.integers(0, 2**32 - 1),
)
def test_shuffled_shards_are_disjoint_cover_and_agree_across_ranks(
    make_dataset: Any, n: int, files: int, k: int, mode: Any, seed: int
) -> None:
    path = make_dataset(n, files)
    config.set_seed(seed)
    per_rank = [ids_of(MindDataset(path, shuffle=mode, num_shards=k, shard_id=s)) for s in range(k)]
    size = -(-n // k)
    assert all(len(r) == size for r in per_rank)
    # Strided split of one permutation: the first n positions are each row exactly once,
    # the rest wrap around to the start of the order.
    positions = [per_rank[p % k][p // k] for p in range(size * k)]
    assert sorted(positions[:n]) == list(range(n))
    assert positions[n:] == positions[: size * k - n]


def test_epochs_reshuffle_deterministically(make_dataset: Any) -> None:
    path = make_dataset(50)
    config.set_seed(7)
    two = ids_of(MindDataset(path, shuffle=True), epochs=2)
    first, second = two[:50], two[50:]
    assert sorted(first) == sorted(second) == list(range(50))
    assert first != second
    config.set_seed(7)
    assert ids_of(MindDataset(path, shuffle=True), epochs=2) == two
    config.set_seed(8)
    assert ids_of(MindDataset(path, shuffle=True)) != first


def test_shuffle_with_num_samples_draws_without_replacement(make_dataset: Any) -> None:
    ids = ids_of(MindDataset(make_dataset(50), shuffle=True, num_samples=40))
    assert len(ids) == 40 and len(set(ids)) == 40


def test_pk_sampler_returns_distinct_rows_per_class(make_dataset: Any) -> None:
    ds = MindDataset(make_dataset(12), sampler=PKSampler(2, class_column="cls"))
    rows = [(int(r["id"]), int(r["cls"])) for r in ds.create_dict_iterator(num_epochs=1)]
    assert len(rows) == 6 and len({r[0] for r in rows}) == 6
    assert sorted(c for _, c in rows) == [0, 0, 1, 1, 2, 2]
    assert all(i % 3 == c for i, c in rows)


def test_a_list_of_files_reads_only_those(make_dataset: Any) -> None:
    first = Path(make_dataset(30, 3))
    second = first.with_name(first.name[:-1] + "1")
    ds = MindDataset([str(second)], shuffle=False)
    ids = ids_of(ds)
    assert ds.get_dataset_size() == len(ids) == 10
    assert ids == sorted(ids)


def test_columns_list_and_values_come_back_typed(make_dataset: Any) -> None:
    ds = MindDataset(make_dataset(10), columns_list=["cls"], shuffle=False)
    assert ds.get_col_names() == ["cls"]
    row = next(iter(ds.create_dict_iterator(num_epochs=1)))
    assert set(row) == {"cls"} and np.asarray(row["cls"]).dtype == np.int32


def test_distributed_sampler_on_mind_dataset(make_dataset: Any) -> None:
    path = make_dataset(10)
    got = [
        ids_of(MindDataset(path, sampler=DistributedSampler(3, s, shuffle=False))) for s in range(3)
    ]
    assert got == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]


def test_missing_index_names_the_file_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "x.mrecord"
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}})
        writer.write_raw_data([{"id": 1}])
    (tmp_path / "x.mrecord.db").unlink()
    with pytest.raises(MissingIndexError, match=r"x\.mrecord\.db.*mrecord reindex"):
        MindDataset(str(path))
    mrecord.reindex(path)
    assert ids_of(MindDataset(str(path))) == [1]


def test_bytes_of_different_lengths_batch_as_byte_strings(tmp_path: Path) -> None:
    path = tmp_path / "b.mrecord"
    blobs = [bytes(range(i)) for i in range(7)]
    with FileWriter(path) as writer:
        writer.add_schema({"data": {"type": "bytes"}, "label": {"type": "int32"}})
        writer.write_raw_data([{"data": b, "label": i} for i, b in enumerate(blobs)])
    row = next(iter(MindDataset(str(path), shuffle=False).create_dict_iterator(num_epochs=1)))
    assert row["data"].dtype == np.uint8 and row["data"].tobytes() == b""
    batches = list(
        MindDataset(str(path), shuffle=False).batch(4).create_dict_iterator(num_epochs=1)
    )
    assert [len(b["data"]) for b in batches] == [4, 3]
    got = [bytes(np.asarray(v)) for b in batches for v in b["data"]]
    assert got == blobs
