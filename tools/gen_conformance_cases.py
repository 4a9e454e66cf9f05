"""Regenerate ``tests/cases/conformance_cases.json`` from real MindSpore (issue 17's sweep).

Run with a ``mindspore==2.10.0`` interpreter (not mrecord's venv)::

    /work/msvenv/bin/python tools/gen_conformance_cases.py

Each case is ``{"name", "args", "expect"}`` or ``{"name", "args", "error", "message"}``:
what MindSpore returned (or raised) for ``args``. Arrays are stored as
``{"dtype", "shape", "data"}``. ``tests/conformance/`` replays every case on mrecord.
Cases where MindSpore is wrong are not generated here: the tests assert mrecord's correct
behaviour and docs/MINDSPORE_DIFFERENCES.md lists them.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("GLOG_v", "3")
# tools/ holds csv.py and mindrecord.py: keep them from shadowing the modules MindSpore imports
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import mindspore as ms  # noqa: E402
import mindspore.dataset as ds  # noqa: E402
import mindspore.dataset.transforms as T  # noqa: E402
import mindspore.dataset.vision as V  # noqa: E402
from mindspore.mindrecord import FileWriter  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "cases" / "conformance_cases.json"
CASES: list[dict[str, Any]] = []


def enc(value: Any) -> Any:
    """A JSON form of an op's output (arrays keep dtype and shape)."""
    if hasattr(value, "asnumpy"):
        value = value.asnumpy()
    if isinstance(value, np.ndarray):
        data = value.tolist()
        if value.dtype.kind == "S":
            data = [b.hex() for b in value.reshape(-1).tolist()]
        elif value.dtype.kind == "f":
            data = np.round(value.astype(np.float64), 6).tolist()
        return {"dtype": value.dtype.str if value.dtype.kind in "SU" else value.dtype.name,
                "shape": list(value.shape), "data": data}
    if isinstance(value, (list, tuple)):
        return [enc(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return value.hex()
    if value is None or isinstance(value, (bool, int, float, str, dict)):
        return value
    return {"type": type(value).__name__}


def case(name: str, args: dict[str, Any], fn: Callable[[], Any]) -> None:
    """Record ``fn()``'s result or exception as a case."""
    try:
        CASES.append({"name": name, "args": args, "expect": enc(fn())})
    except Exception as exc:
        builtins = [k.__name__ for k in type(exc).__mro__
                    if k.__module__ == "builtins" and k not in (object, BaseException, Exception)]
        CASES.append({"name": name, "args": args, "error": type(exc).__name__,
                      "builtins": builtins, "message": message(exc)})


def message(exc: BaseException) -> str:
    """The informative line of an exception (MindSpore's pipeline errors bury it)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    detail = [line for line in lines if line.startswith("[ERROR]") or "Error:" in line]
    # temporary folders differ run to run: keep the file names only
    return re.sub(r"/tmp/[^/\s]+/", "<tmp>/", (detail or lines or [""])[0][:300])


def image(shape: list[int], dtype: str = "uint8") -> np.ndarray:
    """The shared input: ``np.arange(n) % 256`` reshaped (as transform_cases.json)."""
    return (np.arange(int(np.prod(shape))) % 256).astype(dtype).reshape(shape)


def gen(n: int) -> Callable[[], Any]:
    def rows() -> Any:
        for i in range(n):
            yield (np.array([i], dtype=np.int64),)
    return rows


def ids(dataset: Any, **kw: Any) -> list[Any]:
    return [int(np.asarray(r[0]).reshape(-1)[0]) for r in
            dataset.create_tuple_iterator(num_epochs=1, output_numpy=True, **kw)]


# ------------------------------------------------------------------------- MindDataset
def write_mixed(path: str) -> None:
    """Fields declared out of name order: id, cls, blob, f32, name."""
    w = FileWriter(path, shard_num=1, overwrite=True)
    w.add_schema({"id": {"type": "int64"}, "cls": {"type": "int32"}, "blob": {"type": "bytes"},
                  "f32": {"type": "float32", "shape": [2]}, "name": {"type": "string"}}, "s")
    w.write_raw_data([{"id": i, "cls": i % 3, "blob": bytes([i, 255]), "name": f"r{i}",
                       "f32": np.array([i, 0.5], dtype=np.float32)} for i in range(4)])
    w.commit()


def minddataset_cases(tmp: str) -> None:
    path = os.path.join(tmp, "mixed.mindrecord")
    write_mixed(path)
    case("column_order", {"columns_list": None},
         lambda: ds.MindDataset(path, shuffle=False).get_col_names())
    case("column_order", {"columns_list": ["name", "id", "blob"]},
         lambda: ds.MindDataset(path, columns_list=["name", "id", "blob"],
                                shuffle=False).get_col_names())

    def first_tuple() -> Any:
        it = ds.MindDataset(path, shuffle=False).create_tuple_iterator(num_epochs=1,
                                                                        output_numpy=True)
        return [[np.asarray(v).dtype.kind, list(np.shape(v))] for v in next(it)]
    case("tuple_row_kinds", {}, first_tuple)

    def blob_value() -> Any:
        it = ds.MindDataset(path, shuffle=False).create_dict_iterator(num_epochs=1,
                                                                       output_numpy=True)
        return next(it)["blob"]
    case("bytes_field", {}, blob_value)

    def default_output() -> Any:
        it = ds.MindDataset(path, shuffle=False).create_dict_iterator(num_epochs=1)
        row = next(it)
        return [type(row["id"]).__name__, hasattr(row["id"], "asnumpy"),
                type(row["id"].asnumpy()).__name__]
    case("default_output_type", {}, default_output)


# ------------------------------------------------------------------------- iterators, sizes
def pipeline_cases() -> None:
    def epoch_nums(num_epochs: int, repeat: int) -> Any:
        seen: list[list[int]] = []

        def pbm(col: Any, info: Any) -> Any:
            seen.append([info.get_epoch_num(), info.get_batch_num()])
            return (col,)
        d = ds.GeneratorDataset(gen(4), ["x"], shuffle=False).batch(2, per_batch_map=pbm)
        if repeat > 1:
            d = d.repeat(repeat)
        it = d.create_tuple_iterator(num_epochs=num_epochs, output_numpy=True)
        for _ in range(num_epochs):
            for _row in it:
                pass
        return sorted(seen)  # per_batch_map runs on parallel workers: the call order varies
    case("batch_info_epochs", {"num_epochs": 3, "repeat": 1}, lambda: epoch_nums(3, 1))
    case("batch_info_epochs", {"num_epochs": 1, "repeat": 2}, lambda: epoch_nums(1, 2))

    def past_epochs(num_epochs: int) -> Any:
        it = ds.GeneratorDataset(gen(3), ["x"], shuffle=False).create_tuple_iterator(
            num_epochs=num_epochs, output_numpy=True)
        got = []
        for _ in range(num_epochs + 1):
            got.append(len(list(it)))
        return got
    case("iterate_past_num_epochs", {"num_epochs": 1}, lambda: past_epochs(1))
    case("iterate_past_num_epochs", {"num_epochs": 2}, lambda: past_epochs(2))

    case("size_after_repeat", {"ops": "repeat()"},
         lambda: ds.GeneratorDataset(gen(5), ["x"], shuffle=False).repeat().get_dataset_size())
    case("size_after_repeat", {"ops": "repeat().batch(2)"},
         lambda: ds.GeneratorDataset(gen(5), ["x"], shuffle=False).repeat().batch(2)
         .get_dataset_size())
    case("size_after_repeat", {"ops": "repeat(-1)"},
         lambda: ds.GeneratorDataset(gen(5), ["x"], shuffle=False).repeat(-1).get_dataset_size())


# ------------------------------------------------------------------------- small behaviours
def small_cases() -> None:
    for shape, size in (([3, 3, 1], 6), ([3, 3, 1], [5, 4]), ([4, 5, 3], [7, 8]),
                        ([6, 7, 3], [3, 2]), ([2, 2], 5)):
        case("center_crop", {"shape": shape, "size": size},
             partial(lambda shape, size: V.CenterCrop(size)(image(shape)), shape, size))
    case("subset_sampler_num_samples", {"indices": [1, 2, 3]},
         lambda: ds.SubsetSampler([1, 2, 3]).get_num_samples())
    case("subset_sampler_num_samples", {"indices": [1, 2, 3], "num_samples": 2},
         lambda: ds.SubsetSampler([1, 2, 3], num_samples=2).get_num_samples())
    case("one_hot", {"num_classes": 4, "smoothing_rate": 0.1, "label": 2},
         lambda: T.OneHot(4, 0.1)(np.array(2)))
    case("one_hot", {"num_classes": 4, "smoothing_rate": 0.0, "label": 2},
         lambda: T.OneHot(4)(np.array(2)))

    def decode_fromfile(tmp: str, fmt: str) -> Any:
        from PIL import Image
        path = os.path.join(tmp, f"img.{fmt}")
        Image.fromarray(image([6, 5, 3])).save(path)
        with open(path, "ab") as f:  # np.fromfile reads whole float64s: pad to 8 bytes
            f.write(b"\0" * (-os.path.getsize(path) % 8))
        raw = np.fromfile(path)  # float64: the numpy default dtype
        return [raw.dtype.name, V.Decode()(raw)]
    for fmt in ("bmp", "jpg"):
        with tempfile.TemporaryDirectory() as tmp:
            case("decode_float64_fromfile", {"shape": [6, 5, 3], "format": fmt},
                 partial(decode_fromfile, tmp, fmt))


# ------------------------------------------------------------------------- exception classes
def error_cases(tmp: str) -> None:
    path = os.path.join(tmp, "err.mindrecord")
    write_mixed(path)

    def writer(name: str, **kw: Any) -> Any:
        w = FileWriter(os.path.join(tmp, name), shard_num=1, overwrite=True)
        w.add_schema({"id": {"type": "int64"}}, "s")
        return w

    def unknown_index() -> Any:
        writer("e1.mindrecord").add_index(["nope"])

    def no_overwrite() -> Any:
        w = FileWriter(path, shard_num=1, overwrite=False)
        w.add_schema({"id": {"type": "int64"}}, "s")
        w.write_raw_data([{"id": 1}])
        w.commit()

    def decode_garbage() -> Any:
        return V.Decode()(np.frombuffer(b"not an image at all", dtype=np.uint8))

    def write_before_schema() -> Any:
        FileWriter(os.path.join(tmp, "e2.mindrecord"), 1, overwrite=True).write_raw_data([{"a": 1}])

    def commit_twice() -> Any:
        w = writer("e3.mindrecord")
        w.write_raw_data([{"id": 1}])
        w.commit()
        w.commit()

    def zip_same() -> Any:
        a = ds.GeneratorDataset(gen(2), ["x"])
        return ids(ds.zip((a, ds.GeneratorDataset(gen(2), ["x"]))))

    def project_unknown() -> Any:
        d = ds.GeneratorDataset(gen(2), ["x"]).project(["nope"])
        return list(d.create_tuple_iterator(num_epochs=1))

    def map_unknown() -> Any:
        d = ds.GeneratorDataset(gen(2), ["x"]).map(lambda v: v, input_columns=["nope"])
        return list(d.create_tuple_iterator(num_epochs=1))

    def garbage_file() -> Any:
        bad = os.path.join(tmp, "garbage.mindrecord")
        Path(bad).write_bytes(b"\0" * 100)
        return ds.MindDataset(bad).get_dataset_size()

    errs: dict[str, Callable[[], Any]] = {
        "minddataset_missing_file": lambda: ds.MindDataset(os.path.join(tmp, "nope.mindrecord")),
        "minddataset_garbage_file": garbage_file,
        "minddataset_unknown_column": lambda: ids(ds.MindDataset(path, columns_list=["nope"])),
        "minddataset_sampler_and_shuffle": lambda: ds.MindDataset(
            path, sampler=ds.SequentialSampler(), shuffle=True),
        "minddataset_num_shards_without_shard_id": lambda: ds.MindDataset(path, num_shards=2),
        "minddataset_num_samples_negative": lambda: ds.MindDataset(path, num_samples=-1),
        "add_index_unknown_field": unknown_index,
        "filewriter_overwrite_false": no_overwrite,
        "filewriter_shard_num_zero": lambda: FileWriter(os.path.join(tmp, "e4"), shard_num=0),
        "filewriter_bad_field_type": lambda: FileWriter(
            os.path.join(tmp, "e5"), 1, overwrite=True).add_schema({"a": {"type": "int16"}}),
        "filewriter_write_before_schema": write_before_schema,
        "filewriter_commit_twice": commit_twice,
        "decode_garbage": decode_garbage,
        "generator_without_column_names": lambda: ds.GeneratorDataset(gen(2)),
        "batch_size_zero": lambda: ds.GeneratorDataset(gen(2), ["x"]).batch(0),
        "repeat_zero": lambda: ds.GeneratorDataset(gen(2), ["x"]).repeat(0),
        "shuffle_buffer_zero": lambda: ds.GeneratorDataset(gen(2), ["x"]).shuffle(0),
        "take_minus_two": lambda: ds.GeneratorDataset(gen(2), ["x"]).take(-2),
        "rename_length_mismatch": lambda: ds.GeneratorDataset(gen(2), ["x"]).rename(
            ["x"], ["a", "b"]),
        "project_unknown_column": project_unknown,
        "map_unknown_column": map_unknown,
        "zip_same_column": zip_same,
        "distributed_sampler_zero_shards": lambda: ids(ds.MindDataset(
            path, sampler=ds.DistributedSampler(0, 0))),
        "random_sampler_negative_num_samples": lambda: ds.RandomSampler(num_samples=-1),
        "set_seed_negative": lambda: ds.config.set_seed(-1),
        "type_cast_bad_type": lambda: T.TypeCast("nope"),
        "resize_zero": lambda: V.Resize(0),
        "one_hot_zero_classes": lambda: T.OneHot(0),
    }
    for name, fn in errs.items():
        case("error_class", {"what": name}, fn)


# ------------------------------------------------------------------------- new vision ops
def convert(mode: str, img: np.ndarray) -> Any:
    return V.ConvertColor(getattr(V.ConvertMode, mode))(img)


def vision_cases() -> None:
    img = image([5, 7, 3])
    ops: dict[str, tuple[dict[str, Any], Callable[[], Any]]] = {
        "pad_int": ({"padding": 2}, lambda: V.Pad(2)(img)),
        "pad_lr_tb": ({"padding": [1, 2]}, lambda: V.Pad([1, 2])(img)),
        "pad_ltrb_fill": ({"padding": [1, 2, 3, 0], "fill_value": 9},
                          lambda: V.Pad([1, 2, 3, 0], fill_value=9)(img)),
        "pad_ltrb_fill_rgb": ({"padding": [1, 0, 0, 1], "fill_value": [1, 2, 3]},
                              lambda: V.Pad([1, 0, 0, 1], fill_value=(1, 2, 3))(img)),
        "pad_edge": ({"padding": [2, 1], "padding_mode": "EDGE"},
                     lambda: V.Pad([2, 1], padding_mode=V.Border.EDGE)(img)),
        "pad_reflect": ({"padding": [2, 1], "padding_mode": "REFLECT"},
                        lambda: V.Pad([2, 1], padding_mode=V.Border.REFLECT)(img)),
        "pad_symmetric": ({"padding": [2, 1], "padding_mode": "SYMMETRIC"},
                          lambda: V.Pad([2, 1], padding_mode=V.Border.SYMMETRIC)(img)),
        "pad_gray": ({"padding": 1, "shape": [5, 7]}, lambda: V.Pad(1)(image([5, 7]))),
        "crop": ({"coordinates": [1, 2], "size": [3, 4]}, lambda: V.Crop((1, 2), (3, 4))(img)),
        "crop_int": ({"coordinates": [0, 1], "size": 2}, lambda: V.Crop((0, 1), 2)(img)),
        "crop_too_big": ({"coordinates": [3, 3], "size": [3, 4]},
                         lambda: V.Crop((3, 3), (3, 4))(img)),
        "grayscale_1": ({"num_output_channels": 1}, lambda: V.Grayscale(1)(img)),
        "grayscale_3": ({"num_output_channels": 3}, lambda: V.Grayscale(3)(img)),
        "invert": ({}, lambda: V.Invert()(img)),
        "to_tensor": ({}, lambda: V.ToTensor()(img)),
        "to_tensor_float64": ({"output_type": "float64"},
                              lambda: V.ToTensor(np.float64)(img)),
        "to_tensor_gray": ({"shape": [5, 7]}, lambda: V.ToTensor()(image([5, 7]))),
        "to_type": ({"data_type": "int16"}, lambda: V.ToType(np.int16)(img)),
        "to_type_mstype": ({"data_type": "ms.float32"}, lambda: V.ToType(ms.float32)(img)),
        "type_cast_mstype": ({"data_type": "ms.int32"},
                             lambda: T.TypeCast(ms.int32)(np.array([1.7, -2.2]))),
        "pad_to_size": ({"size": [7, 9]}, lambda: V.PadToSize((7, 9))(img)),
        "pad_to_size_int": ({"size": 8}, lambda: V.PadToSize(8)(img)),
        "pad_to_size_offset": ({"size": [7, 9], "offset": [1, 2], "fill_value": 5},
                               lambda: V.PadToSize((7, 9), offset=(1, 2), fill_value=5)(img)),
        "pad_to_size_offset_int": ({"size": [7, 9], "offset": 1},
                                   lambda: V.PadToSize((7, 9), offset=1)(img)),
        "pad_to_size_edge": ({"size": [7, 9], "offset": [1, 2], "padding_mode": "EDGE"},
                             lambda: V.PadToSize((7, 9), offset=(1, 2),
                                                 padding_mode=V.Border.EDGE)(img)),
        "resized_crop_nearest": ({"box": [1, 2, 3, 4], "size": [6, 8], "interpolation": "NEAREST"},
                                 lambda: V.ResizedCrop(1, 2, 3, 4, (6, 8), V.Inter.NEAREST)(img)),
        "resized_crop_linear": ({"box": [1, 2, 3, 4], "size": [6, 8], "interpolation": "LINEAR"},
                                lambda: V.ResizedCrop(1, 2, 3, 4, (6, 8))(img)),
        "resized_crop_int_size": ({"box": [0, 0, 4, 6], "size": 2, "interpolation": "LINEAR"},
                                  lambda: V.ResizedCrop(0, 0, 4, 6, 2)(img)),
    }
    modes = ["COLOR_RGB2BGR", "COLOR_RGB2GRAY", "COLOR_BGR2GRAY", "COLOR_RGB2RGBA",
             "COLOR_BGR2RGBA"]
    for mode in modes:
        ops[f"convert_color_{mode}"] = ({"convert_mode": mode}, partial(convert, mode, img))
    rgba = image([5, 7, 4])
    for mode in ["COLOR_RGBA2RGB", "COLOR_RGBA2BGR", "COLOR_RGBA2GRAY", "COLOR_BGRA2RGBA"]:
        ops[f"convert_color_{mode}"] = ({"convert_mode": mode, "shape": [5, 7, 4]},
                                        partial(convert, mode, rgba))
    gray = image([5, 7])
    for mode in ["COLOR_GRAY2RGB", "COLOR_GRAY2RGBA"]:
        ops[f"convert_color_{mode}"] = ({"convert_mode": mode, "shape": [5, 7]},
                                        partial(convert, mode, gray))
    for deg, expand in ((90, False), (90, True), (180, False), (-90, True), (270, False),
                        (30, False), (30, True), (45, False)):
        ops[f"rotate_{deg}_{expand}"] = (
            {"degrees": deg, "expand": expand},
            partial(lambda deg, expand: V.Rotate(deg, expand=expand)(img), deg, expand))
    ops["rotate_90_center"] = ({"degrees": 90, "center": [2, 1]},
                               lambda: V.Rotate(90, center=(2, 1))(img))
    ops["rotate_30_fill"] = ({"degrees": 30, "fill_value": 7},
                             lambda: V.Rotate(30, fill_value=7)(img))
    ops["rotate_30_bilinear"] = ({"degrees": 30, "resample": "BILINEAR"},
                                 lambda: V.Rotate(30, resample=V.Inter.BILINEAR)(img))
    for name, (args, fn) in ops.items():
        case(f"vision_{name}", args, fn)
    # ToPIL then back: a PIL image of the same pixels
    case("vision_to_pil", {}, lambda: [type(V.ToPIL()(img)).__name__,
                                       np.asarray(V.ToPIL()(img))])


# ------------------------------------------------------------------------- new transforms
def transforms_cases() -> None:
    a = np.array([1, 2, 3, 2, 1], dtype=np.int32)
    ops: dict[str, tuple[dict[str, Any], Callable[[], Any]]] = {
        "concatenate": ({"prepend": [9], "append": [7, 8]},
                        lambda: T.Concatenate(0, np.array([9], np.int32),
                                              np.array([7, 8], np.int32))(a)),
        "concatenate_plain": ({}, lambda: T.Concatenate()(a)),
        "concatenate_strings": ({"prepend": ["a"]}, lambda: T.Concatenate(
            0, np.array(["a"]))(np.array(["b", "c"]))),
        "pad_end": ({"pad_shape": [7], "pad_value": -1}, lambda: T.PadEnd([7], -1)(a)),
        "pad_end_default": ({"pad_shape": [7]}, lambda: T.PadEnd([7])(a)),
        "pad_end_cut": ({"pad_shape": [3]}, lambda: T.PadEnd([3])(a)),
        "pad_end_2d": ({"pad_shape": [3, 4], "pad_value": 0},
                       lambda: T.PadEnd([3, 4], 0)(np.ones((2, 3), np.float32))),
        "pad_end_str": ({"pad_shape": [3], "pad_value": "z"},
                        lambda: T.PadEnd([3], "z")(np.array(["a"]))),
        "slice_int": ({"slices": [1]}, lambda: T.Slice(1)(a)),
        "slice_list": ({"slices": [[0, 2, 4]]}, lambda: T.Slice([0, 2, 4])(a)),
        "slice_slice": ({"slices": ["1:4:2"]}, lambda: T.Slice(slice(1, 4, 2))(a)),
        "slice_none": ({"slices": [None]}, lambda: T.Slice(None)(a)),
        "slice_ellipsis": ({"slices": ["..."]}, lambda: T.Slice(Ellipsis)(a)),
        "slice_2d": ({"slices": [1, "0:2"]},
                     lambda: T.Slice(1, slice(0, 2))(np.arange(12).reshape(3, 4))),
        "slice_negative": ({"slices": [-1]}, lambda: T.Slice(-1)(a)),
        "unique": ({}, lambda: T.Unique()(np.array([5, 3, 5, 1, 3, 3], np.int32))),
        "unique_2d": ({}, lambda: T.Unique()(np.array([[5, 3], [5, 1]], np.int32))),
        "random_apply_1": ({"prob": 1.0}, lambda: T.RandomApply([T.TypeCast(np.float32)],
                                                              prob=1.0)(a)),
        "random_apply_0": ({"prob": 0.0}, lambda: T.RandomApply([T.TypeCast(np.float32)],
                                                              prob=0.0)(a)),
        "random_choice_one": ({}, lambda: T.RandomChoice([T.TypeCast(np.int64)])(a)),
        "one_hot_smoothing": ({}, lambda: T.OneHot(3, 0.2)(np.array([0, 2]))),
    }
    for rel in ("EQ", "NE", "GT", "GE", "LT", "LE"):
        ops[f"mask_{rel}"] = ({"operator": rel, "constant": 2},
                              partial(lambda rel: T.Mask(getattr(T.Relational, rel), 2)(a), rel))
    ops["mask_dtype"] = ({"operator": "EQ", "constant": 2, "dtype": "int32"},
                         lambda: T.Mask(T.Relational.EQ, 2, ms.int32)(a))
    ops["mask_float_constant"] = ({"operator": "GT", "constant": 1.5},
                                  lambda: T.Mask(T.Relational.GT, 1.5)(a))
    ops["mask_str"] = ({"operator": "EQ", "constant": "b"},
                       lambda: T.Mask(T.Relational.EQ, "b")(np.array(["a", "b"])))
    for name, (args, fn) in ops.items():
        case(f"transforms_{name}", args, fn)


# ------------------------------------------------------------------------- new dataset names
def dataset_cases() -> None:
    def rows(n: int, col: str = "x") -> Any:
        return ds.GeneratorDataset(gen(n), [col], shuffle=False)

    case("zip_module", {}, lambda: [ds.zip((rows(3, "a"), rows(4, "b"))).get_col_names(),
                                    ds.zip((rows(3, "a"), rows(4, "b"))).get_dataset_size()])
    for sizes in ([3, 7], [0.3, 0.7], [0.25, 0.25, 0.5], [0.34, 0.33, 0.33]):
        case("split", {"n": 10, "sizes": sizes},
             partial(lambda sizes: [ids(s) for s in rows(10).split(sizes, randomize=False)],
                     sizes))
    case("split", {"n": 10, "sizes": [3, 8]},
         lambda: [ids(s) for s in rows(10).split([3, 8], randomize=False)])
    case("split", {"n": 10, "sizes": [0.05, 0.95]},
         lambda: [ids(s) for s in rows(10).split([0.05, 0.95], randomize=False)])

    def flat_map() -> Any:
        def twice(x: Any) -> Any:
            value = int(np.asarray(x).reshape(-1)[0])
            return ds.GeneratorDataset([(np.array([value], np.int64),)] * 2, ["y"],
                                       shuffle=False)
        d = rows(3).flat_map(twice)
        return [d.get_col_names(), ids(d)]
    case("flat_map", {}, flat_map)

    def apply() -> Any:
        d = rows(5).apply(lambda d: d.batch(2))
        return [d.get_dataset_size(), [list(np.asarray(r[0]).reshape(-1).tolist())
                                       for r in d.create_tuple_iterator(output_numpy=True,
                                                                        num_epochs=1)]]
    case("apply", {}, apply)

    def batch_callable() -> Any:
        d = rows(10).batch(batch_size=lambda info: info.get_batch_num() + 1)
        return [list(np.asarray(r[0]).reshape(-1).tolist())
                for r in d.create_tuple_iterator(output_numpy=True, num_epochs=1)]
    case("batch_callable", {"n": 10}, batch_callable)

    def bucket(boundaries: list[int], sizes: list[int], pad: bool, drop: bool) -> Any:
        def seqs() -> Any:
            for n in (1, 3, 2, 5, 1, 4, 2, 6):
                yield (np.arange(n, dtype=np.int32),)
        d = ds.GeneratorDataset(seqs, ["s"], shuffle=False).bucket_batch_by_length(
            ["s"], boundaries, sizes, pad_to_bucket_boundary=pad, drop_remainder=drop)
        return [np.asarray(r[0]).tolist() for r in d.create_tuple_iterator(output_numpy=True,
                                                                           num_epochs=1)]
    for args in (([3, 5], [2, 2, 2], False, False), ([3, 5], [2, 2, 2], True, False),
                 ([3], [3, 2], False, True)):
        case("bucket_batch_by_length", {"boundaries": args[0], "sizes": args[1],
                                        "pad_to_bucket_boundary": args[2],
                                        "drop_remainder": args[3]},
             partial(bucket, *args))

    def bucket_fn() -> Any:
        def seqs() -> Any:
            for n in (1, 3, 2, 5):
                yield (np.arange(n, dtype=np.int32), np.array(n, dtype=np.int32))
        d = ds.GeneratorDataset(seqs, ["s", "n"], shuffle=False).bucket_batch_by_length(
            ["n"], [3], [2, 2], element_length_function=lambda n: int(n),
            pad_info={"s": ([None], -1)})
        return [[np.asarray(v).tolist() for v in r]
                for r in d.create_tuple_iterator(output_numpy=True, num_epochs=1)]
    case("bucket_batch_by_length_fn", {}, bucket_fn)

    def add_sampler() -> Any:
        d = ds.GeneratorDataset([(np.array([i], np.int64),) for i in range(10)], ["x"],
                                shuffle=False)
        d.add_sampler(ds.DistributedSampler(2, 1, shuffle=False))
        return [d.get_dataset_size(), ids(d)]
    case("add_sampler", {}, add_sampler)
    case("num_classes", {}, lambda: rows(3).num_classes())
    case("shuffle_false", {}, lambda: [int(ds.Shuffle.FALSE.value)
                                       if hasattr(ds.Shuffle.FALSE, "value") else None,
                                       str(ds.Shuffle.FALSE)])

    def generator_schema() -> Any:
        schema = ds.Schema()
        schema.add_column("a", de_type=ms.int64, shape=[1])
        d = ds.GeneratorDataset(gen(3), schema=schema, shuffle=False)
        return [d.get_col_names(), ids(d)]
    case("generator_schema", {}, generator_schema)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        minddataset_cases(tmp)
        pipeline_cases()
        small_cases()
        error_cases(tmp)
        vision_cases()
        transforms_cases()
        dataset_cases()
    OUT.write_text(json.dumps({
        "source": f"MindSpore {ms.__version__} (CPU wheel), numpy {np.__version__}; "
                  "tools/gen_conformance_cases.py",
        "input": "images are np.arange(n) % 256 as uint8 reshaped to args.shape (default "
                 "[5, 7, 3]); arrays are {dtype, shape, data}, floats rounded to 6 places",
        "cases": CASES}, indent=1) + "\n")
    print(f"wrote {len(CASES)} cases to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
