"""Issue 17, MindDataset and iterators: column order, row kinds, Tensor outputs, epochs,
small behaviours, and the builtin classes of errors.

Every expected value comes from ``tests/cases/conformance_cases.json``, written by
``tools/gen_conformance_cases.py`` running real MindSpore 2.10. Where mrecord departs on
purpose (docs/MINDSPORE_DIFFERENCES.md), the test says so and asserts mrecord's behaviour.
"""


from __future__ import annotations

import builtins
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord
from mrecord import Dataset, FileWriter, GeneratorDataset, MindDataset, SubsetSampler, config
from mrecord import transforms as T
from mrecord import vision as V
from tests.conformance.helpers import (
    cases,
    expected_array,
    first,
    gen_rows,
    image,
    one,
)


# ----------------------------------------------------------------------------- MindDataset
def test_default_column_order_is_sorted_by_name(mixed: str) -> None:
    expect = one("column_order", columns_list=None)["expect"]
    assert MindDataset(mixed, shuffle=False).get_col_names() == expect
    row = first(MindDataset(mixed, shuffle=False).create_tuple_iterator(output_numpy=True))
    assert int(row[expect.index("id")]) == 0
    assert row[expect.index("name")].item() == "r0"


def test_columns_list_keeps_its_order(mixed: str) -> None:
    case = one("column_order", columns_list=["name", "id", "blob"])
    ds = MindDataset(mixed, columns_list=case["args"]["columns_list"], shuffle=False)
    assert ds.get_col_names() == case["expect"]
    row = first(ds.create_tuple_iterator(num_epochs=1, output_numpy=True))
    assert [row[0].item(), int(row[1])] == ["r0", 0]


def test_tuple_row_kinds_match_except_bytes(mixed: str) -> None:
    """Same kinds and shapes as MindSpore, except bytes: a uint8 array (documented)."""
    expect = one("tuple_row_kinds")["expect"]
    names = MindDataset(mixed, shuffle=False).get_col_names()
    it = MindDataset(mixed, shuffle=False).create_tuple_iterator(num_epochs=1, output_numpy=True)
    got = [[np.asarray(v).dtype.kind, list(np.shape(v))] for v in first(it)]
    blob = names.index("blob")
    assert expect[blob] == ["S", [1]]
    assert got[blob] == ["u", [2]]
    assert [g for i, g in enumerate(got) if i != blob] == [
        e for i, e in enumerate(expect) if i != blob
    ]


def test_bytes_field_gives_the_same_bytes(mixed: str) -> None:
    enc = one("bytes_field")["expect"]
    ms_bytes = bytes.fromhex(enc["data"][0])
    row = first(MindDataset(mixed, shuffle=False).create_dict_iterator(output_numpy=True))
    assert row["blob"].dtype == np.uint8
    assert row["blob"].tobytes() == ms_bytes
    assert np.frombuffer(row["blob"], dtype=np.uint8).tolist() == list(ms_bytes)


# ----------------------------------------------------------------------------- iterators
def test_default_outputs_have_asnumpy(mixed: str) -> None:
    ms_type, has_asnumpy, plain = one("default_output_type")["expect"]
    assert (ms_type, has_asnumpy, plain) == ("Tensor", True, "ndarray")
    row = first(MindDataset(mixed, shuffle=False).create_dict_iterator(num_epochs=1))
    value = row["id"]
    assert type(value).__name__ == "Tensor"
    assert type(value.asnumpy()) is np.ndarray
    assert int(value.asnumpy()) == 0
    tup = first(MindDataset(mixed, shuffle=False).create_tuple_iterator(num_epochs=1))
    assert all(isinstance(v, mrecord.Tensor) for v in tup)


def test_output_numpy_true_gives_plain_arrays(mixed: str) -> None:
    ds = MindDataset(mixed, shuffle=False)
    for row in ds.create_dict_iterator(num_epochs=1, output_numpy=True):
        assert all(type(v) is np.ndarray for v in row.values())
    for tup in ds.create_tuple_iterator(num_epochs=1, output_numpy=True):
        assert all(type(v) is np.ndarray for v in tup)


def test_tensor_behaves_as_an_ndarray() -> None:
    t = mrecord.Tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
    plus_one = t + 1
    assert isinstance(plus_one, mrecord.Tensor)
    assert plus_one.asnumpy().tolist() == [[1, 2, 3], [4, 5, 6]]
    assert int(t.sum()) == 15
    assert type(np.asarray(t)) is np.ndarray
    for protocol in (2, 5):
        back = pickle.loads(pickle.dumps(t, protocol=protocol))
        assert isinstance(back, mrecord.Tensor)
        np.testing.assert_array_equal(back.asnumpy(), t.asnumpy())
    assert mrecord.Tensor([1, 2], dtype=np.float32).dtype == np.float32
    assert t.numpy() is not t and type(t.numpy()) is np.ndarray


def test_tensor_outputs_through_worker_processes() -> None:
    """Iterator tensors fed to a multiprocessing map come back as equal arrays."""
    ds = GeneratorDataset(gen_rows(4), ["x"], shuffle=False)
    values = [row["x"] for row in ds.create_dict_iterator(num_epochs=1)]
    source = GeneratorDataset([(v,) for v in values], ["x"], shuffle=False)
    doubled = source.map(_double, input_columns="x", num_parallel_workers=2,
                         python_multiprocessing=True)
    got = [int(r[0].asnumpy()[0]) for r in doubled.create_tuple_iterator(num_epochs=1)]
    assert got == [0, 2, 4, 6]


def _double(x: np.ndarray) -> np.ndarray:
    return np.asarray(x) * 2


def test_batch_info_epoch_num_counts_epochs() -> None:
    for case in cases("batch_info_epochs"):
        num_epochs, repeat = case["args"]["num_epochs"], case["args"]["repeat"]
        seen: list[list[int]] = []

        def pbm(col: Any, info: mrecord.BatchInfo, seen: list[list[int]] = seen) -> Any:
            seen.append([info.get_epoch_num(), info.get_batch_num()])
            return (col,)

        ds: Dataset = GeneratorDataset(gen_rows(4), ["x"], shuffle=False)
        ds = ds.batch(2, per_batch_map=pbm)
        if repeat > 1:
            ds = ds.repeat(repeat)
        it = ds.create_tuple_iterator(num_epochs=num_epochs)
        for _ in range(num_epochs):
            for _row in it:
                pass
        # MindSpore runs per_batch_map on parallel workers: compare the calls as a multiset.
        assert sorted(seen) == sorted(case["expect"]), case["args"]


@pytest.mark.parametrize("num_epochs", [1, 2])
def test_iterating_past_num_epochs_raises(num_epochs: int) -> None:
    case = one("iterate_past_num_epochs", num_epochs=num_epochs)
    assert case["error"] == "RuntimeError"
    it = GeneratorDataset(gen_rows(3), ["x"], shuffle=False).create_tuple_iterator(
        num_epochs=num_epochs
    )
    for _ in range(num_epochs):
        assert len(list(it)) == 3
    with pytest.raises(RuntimeError, match="num_epochs"):
        list(it)


def test_size_after_endless_repeat_is_one_pass() -> None:
    def base() -> GeneratorDataset:
        # A sized source: an endless repeat over an unsized one stays -1 (documented).
        return GeneratorDataset(list(gen_rows(5)()), ["x"], shuffle=False)

    made = {
        "repeat()": base().repeat(),
        "repeat().batch(2)": base().repeat().batch(2),
        "repeat(-1)": base().repeat(-1),
    }
    for case in cases("size_after_repeat"):
        assert made[case["args"]["ops"]].get_dataset_size() == case["expect"], case["args"]
    unsized = GeneratorDataset(gen_rows(5), ["x"], shuffle=False).repeat()
    assert unsized.get_dataset_size() == -1  # a pass to count would never end


# ----------------------------------------------------------------------------- small behaviours
@pytest.mark.parametrize("case", cases("center_crop"), ids=lambda c: json.dumps(c["args"]))
def test_center_crop_matches_mindspore(case: dict[str, Any]) -> None:
    out = V.CenterCrop(case["args"]["size"])(image(case["args"]["shape"]))
    np.testing.assert_array_equal(out, expected_array(case["expect"]))


def test_subset_sampler_num_samples() -> None:
    for case in cases("subset_sampler_num_samples"):
        args = case["args"]
        sampler = SubsetSampler(args["indices"], num_samples=args.get("num_samples"))
        assert sampler.get_num_samples() == case["expect"]


def test_one_hot_dtypes_match_mindspore() -> None:
    for case in cases("one_hot"):
        args = case["args"]
        out = T.OneHot(args["num_classes"], args["smoothing_rate"])(np.array(args["label"]))
        want = expected_array(case["expect"])
        assert out.dtype == want.dtype
        np.testing.assert_allclose(out, want, atol=1e-6)


@pytest.mark.parametrize("fmt", ["bmp", "jpg"])
def test_decode_accepts_float64_from_fromfile(tmp_path: Path, fmt: str) -> None:
    pil = pytest.importorskip("PIL.Image")
    case = one("decode_float64_fromfile", format=fmt)
    path = tmp_path / f"img.{fmt}"
    pil.fromarray(image(case["args"]["shape"])).save(path)
    with open(path, "ab") as f:
        f.write(b"\0" * (-path.stat().st_size % 8))
    raw = np.fromfile(path)
    assert raw.dtype.name == case["expect"][0]
    out = V.Decode()(raw)
    want = expected_array(case["expect"][1])
    assert out.shape == want.shape
    # JPEG decoders may differ by a rounding step; BMP is exact.
    np.testing.assert_allclose(out.astype(int), want.astype(int), atol=0 if fmt == "bmp" else 2)


# ----------------------------------------------------------------------------- error classes
def _error_makers(tmp: Path, mixed: str) -> dict[str, Callable[[], Any]]:
    def writer(name: str) -> FileWriter:
        w = FileWriter(tmp / name, shard_num=1, overwrite=True)
        w.add_schema({"id": {"type": "int64"}}, "s")
        return w

    def unknown_index() -> None:
        writer("e1.mrecord").add_index(["nope"])

    def no_overwrite() -> None:
        w = FileWriter(mixed, shard_num=1, overwrite=False)
        w.add_schema({"id": {"type": "int64"}}, "s")
        w.write_raw_data([{"id": 1}])
        w.commit()

    def write_before_schema() -> None:
        FileWriter(tmp / "e2.mrecord", 1, overwrite=True).write_raw_data([{"a": 1}])

    def commit_twice() -> None:
        w = writer("e3.mrecord")
        w.write_raw_data([{"id": 1}])
        w.commit()
        w.commit()

    def garbage_file() -> Any:
        bad = tmp / "garbage.mrecord"
        bad.write_bytes(b"\0" * 100)
        return MindDataset(str(bad)).get_dataset_size()

    def gen(n: int = 2, col: str = "x") -> GeneratorDataset:
        return GeneratorDataset(gen_rows(n), [col], shuffle=False)

    def iterate(ds: mrecord.Dataset) -> list[Any]:
        return list(ds.create_tuple_iterator(num_epochs=1))

    return {
        "minddataset_missing_file": lambda: MindDataset(str(tmp / "nope.mrecord")),
        "minddataset_garbage_file": garbage_file,
        "minddataset_unknown_column": lambda: iterate(MindDataset(mixed, columns_list=["nope"])),
        "minddataset_sampler_and_shuffle": lambda: MindDataset(
            mixed, sampler=mrecord.SequentialSampler(), shuffle=True
        ),
        "minddataset_num_shards_without_shard_id": lambda: MindDataset(mixed, num_shards=2),
        "minddataset_num_samples_negative": lambda: MindDataset(mixed, num_samples=-1),
        "add_index_unknown_field": unknown_index,
        "filewriter_overwrite_false": no_overwrite,
        "filewriter_shard_num_zero": lambda: FileWriter(tmp / "e4", shard_num=0),
        "filewriter_bad_field_type": lambda: FileWriter(tmp / "e5", 1, overwrite=True).add_schema(
            {"a": {"type": "int17"}}
        ),
        "filewriter_write_before_schema": write_before_schema,
        "filewriter_commit_twice": commit_twice,
        "decode_garbage": lambda: V.Decode()(np.frombuffer(b"not an image at all", np.uint8)),
        "generator_without_column_names": lambda: GeneratorDataset(gen_rows(2)),
        "batch_size_zero": lambda: gen().batch(0),
        "repeat_zero": lambda: gen().repeat(0),
        "shuffle_buffer_zero": lambda: gen().shuffle(0),
        "take_minus_two": lambda: gen().take(-2),
        "rename_length_mismatch": lambda: gen().rename(["x"], ["a", "b"]),
        "project_unknown_column": lambda: iterate(gen().project(["nope"])),
        "map_unknown_column": lambda: iterate(gen().map(lambda v: v, input_columns=["nope"])),
        "zip_same_column": lambda: iterate(mrecord.zip((gen(), gen()))),
        "distributed_sampler_zero_shards": lambda: iterate(
            MindDataset(mixed, sampler=mrecord.DistributedSampler(0, 0))
        ),
        "random_sampler_negative_num_samples": lambda: mrecord.RandomSampler(num_samples=-1),
        "set_seed_negative": lambda: config.set_seed(-1),
        "type_cast_bad_type": lambda: T.TypeCast(object()),
        "resize_zero": lambda: V.Resize(0),
        "one_hot_zero_classes": lambda: T.OneHot(0),
    }


# MindSpore raises its own classes here (no builtin base): mrecord's are ValueErrors.
_MINDSPORE_OWN = {"filewriter_shard_num_zero", "filewriter_bad_field_type"}


@pytest.mark.parametrize("case", cases("error_class"), ids=lambda c: c["args"]["what"])
def test_errors_inherit_mindspores_builtin(
    case: dict[str, Any], mixed: str, tmp_path: Path
) -> None:
    what = case["args"]["what"]
    make = _error_makers(tmp_path, mixed)[what]
    with pytest.raises(Exception) as info:
        make()
    if what in _MINDSPORE_OWN:
        assert case["builtins"] == []
        assert isinstance(info.value, ValueError)
        return
    for name in case["builtins"]:
        assert isinstance(info.value, getattr(builtins, name)), (what, type(info.value).__mro__)
