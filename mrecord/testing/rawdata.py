"""Small files in the real raw formats (CIFAR-10 binary, MNIST idx, image folders).

Every row carries its id so a test can tell which row came out: the id is stored in
the first pixels of the image (CIFAR-10: pixel (0, 0), one byte per colour plane,
little end first; MNIST: pixels (0, 0), (0, 1), (0, 2)); labels are ``id % 10``.
Only numpy and the standard library are imported at module level (Pillow lazily,
for image folders), so ``tools/gen_source_cases.py`` can load this file by path
under MindSpore's interpreter, where mrecord itself is not installed.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CASE_CIFAR10_FILES",
    "CASE_IMAGE_CLASSES",
    "CASE_MNIST_SPLITS",
    "build_dataset",
    "build_sampler",
    "hwc_ids",
    "mnist_ids",
    "observe",
    "ragged_rows",
    "summarize_ids",
    "write_case_sources",
    "write_cifar10",
    "write_image_folder",
    "write_mnist",
]

_CIFAR_RECORD = 1 + 3 * 32 * 32


def _id_bytes(ids: np.ndarray) -> np.ndarray:
    """``uint8[n, 3]``: the low three bytes of each id."""
    ids = np.asarray(ids, dtype=np.int64)
    return np.stack([(ids >> (8 * k)) & 255 for k in range(3)], axis=1).astype(np.uint8)


def write_cifar10(
    folder: str | os.PathLike[str], files: Mapping[str, int], *, seed: int = 0
) -> list[int]:
    """Write CIFAR-10 binary files ``{name: records}`` in order; return every row id.

    Ids run on from file to file in the order given. Pixels other than the id
    bytes are random (seeded), so an HWC/CHW mix-up shows.
    """
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    start = 0
    for name, count in files.items():
        ids = np.arange(start, start + count)
        records = rng.integers(0, 256, size=(count, _CIFAR_RECORD), dtype=np.uint8)
        records[:, 0] = ids % 10
        planes = records[:, 1:].reshape(count, 3, 32 * 32)
        planes[:, :, 0] = _id_bytes(ids)
        records.tofile(root / name)
        start += count
    return list(range(start))


def hwc_ids(images: np.ndarray | list[np.ndarray]) -> list[int]:
    """The ids in RGB HWC images (CIFAR-10 rows, decoded image-folder rows): pixel (0, 0)."""
    seq = images if isinstance(images, list) else [images]
    pixels = [np.asarray(p, dtype=np.int64).reshape(-1, *np.shape(p)[-3:])[:, 0, 0] for p in seq]
    pix = np.concatenate(pixels)
    return [int(v) for v in pix[:, 0] + 256 * pix[:, 1] + 65536 * pix[:, 2]]


def _idx_bytes(magic: int, array: np.ndarray) -> bytes:
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def write_mnist(
    folder: str | os.PathLike[str],
    splits: Mapping[str, int],
    *,
    gz: bool = False,
    seed: int = 0,
    size: tuple[int, int] = (28, 28),
) -> dict[str, list[int]]:
    """Write MNIST idx files for ``{"train": n, "test": m}``; return each split's ids.

    Train ids are ``0 .. n-1``, test ids ``1000 + 0 .. m-1``.
    """
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    out: dict[str, list[int]] = {}
    for split, count in splits.items():
        prefix, first = ("train", 0) if split == "train" else ("t10k", 1000)
        ids = np.arange(first, first + count)
        images = rng.integers(0, 256, size=(count, *size), dtype=np.uint8)
        images[:, 0, :3] = _id_bytes(ids)
        for kind, magic, data in (
            ("images-idx3", 2051, images),
            ("labels-idx1", 1 + 2048, (ids % 10).astype(np.uint8)),
        ):
            raw = _idx_bytes(magic, data)
            path = root / f"{prefix}-{kind}-ubyte"
            if gz:
                path.with_name(path.name + ".gz").write_bytes(gzip.compress(raw))
            else:
                path.write_bytes(raw)
        out[split] = [int(i) for i in ids]
    return out


def mnist_ids(images: np.ndarray) -> list[int]:
    """The ids stored by :func:`write_mnist` in images ``[n, H, W, 1]`` (or one image)."""
    arr = np.asarray(images, dtype=np.int64)
    arr = arr[..., 0] if arr.shape[-1] == 1 else arr
    first = arr.reshape(-1, *arr.shape[-2:])[:, 0, :3]
    return [int(v) for v in first[:, 0] + 256 * first[:, 1] + 65536 * first[:, 2]]


def write_image_folder(
    folder: str | os.PathLike[str],
    classes: Mapping[str, int],
    *,
    fmt: str = "png",
    size: tuple[int, int] = (6, 5),
) -> dict[str, list[int]]:
    """Write ``{class: count}`` PNG (or BMP) images, ids stored in pixel (0, 0); return ids.

    Ids number the images class by class in sorted class order, files named
    ``img{id:04d}.{fmt}`` so that name order is id order.
    """
    from PIL import Image

    root = Path(folder)
    out: dict[str, list[int]] = {}
    next_id = 0
    for name in sorted(classes):
        (root / name).mkdir(parents=True, exist_ok=True)
        out[name] = []
        for _ in range(classes[name]):
            pixels = np.full((size[1], size[0], 3), 7, dtype=np.uint8)
            pixels[0, 0] = _id_bytes(np.array([next_id]))[0]
            buf = io.BytesIO()
            Image.fromarray(pixels).save(buf, format=fmt.upper())
            (root / name / f"img{next_id:04d}.{fmt}").write_bytes(buf.getvalue())
            out[name].append(next_id)
            next_id += 1
    return out


# ------------------------------------------------------------- the conformance layout
CASE_CIFAR10_FILES = {"data_batch_1.bin": 10_000, "test_batch.bin": 10_000}
"""MindSpore's Cifar10Dataset insists on 10,000 records per file, so the cases use that."""
CASE_MNIST_SPLITS = {"train": 17, "test": 6}
CASE_IMAGE_CLASSES = {"cat": 4, "dog": 3, "emu": 5}


def write_case_sources(root: str | os.PathLike[str]) -> dict[str, Path]:
    """The three raw datasets ``tests/cases/source_cases.json`` was generated from."""
    base = Path(root)
    paths = {"cifar10": base / "cifar10", "mnist": base / "mnist", "imagefolder": base / "images"}
    write_cifar10(paths["cifar10"], CASE_CIFAR10_FILES)
    write_mnist(paths["mnist"], CASE_MNIST_SPLITS)
    write_image_folder(paths["imagefolder"], CASE_IMAGE_CLASSES)
    return paths


def summarize_ids(ids: list[int]) -> list[int] | dict[str, object]:
    """Short lists as they are; long ones as length, head, tail and a SHA-256 of the int64s."""
    if len(ids) <= 64:
        return list(ids)
    digest = hashlib.sha256(np.asarray(ids, dtype="<i8").tobytes()).hexdigest()
    return {"n": len(ids), "head": list(ids[:8]), "tail": list(ids[-8:]), "sha256": digest}


# ------------------------------------------------------ cases run on MindSpore and mrecord
# ``api`` is ``mindspore.dataset`` or ``mrecord``: the same names build the same pipeline.
_DATASETS = {
    "cifar10": "Cifar10Dataset",
    "mnist": "MnistDataset",
    "imagefolder": "ImageFolderDataset",
}


def build_sampler(api: Any, spec: Mapping[str, Any]) -> Any:
    """``{"type": "SequentialSampler", "args": {...}, "child": spec}`` built with ``api``."""
    sampler = getattr(api, spec["type"])(**spec.get("args", {}))
    if spec.get("child"):
        sampler.add_child(build_sampler(api, spec["child"]))
    return sampler


def build_dataset(api: Any, paths: Mapping[str, Path], args: Mapping[str, Any]) -> Any:
    """The source a case describes: ``{"source", "kwargs", "sampler", "use_sampler"}``."""
    source = args["source"]
    kwargs = dict(args.get("kwargs", {}))
    if "sampler" in args:
        kwargs["sampler"] = build_sampler(api, args["sampler"])
    if source == "imagefolder":
        kwargs.setdefault("decode", True)
    folder = args.get("dataset_dir", str(paths[source]))
    dataset = getattr(api, _DATASETS[source])(folder, **kwargs)
    if "use_sampler" in args:
        dataset.use_sampler(build_sampler(api, args["use_sampler"]))
    return dataset


def ragged_rows() -> Any:
    """A generator function of 7 rows whose arrays differ in shape (padded_batch cases)."""

    def rows() -> Any:
        for i in range(7):
            yield np.arange(i % 4 + 1, dtype=np.int32), np.full((i % 2 + 1, 2), i, np.float32)

    return rows


def observe(api: Any, paths: Mapping[str, Path], args: Mapping[str, Any]) -> dict[str, Any]:
    """What a case's pipeline gives: sizes, row ids (and labels), or types and shapes."""
    if args["source"] == "ragged":
        dataset = api.GeneratorDataset(ragged_rows(), ["a", "b"], shuffle=False)
        dataset = dataset.padded_batch(**args["kwargs"])
        batches = list(dataset.create_dict_iterator(num_epochs=1, output_numpy=True))
        return {
            "size": dataset.get_dataset_size(),
            "batches": [{k: np.asarray(v).tolist() for k, v in b.items()} for b in batches],
        }
    dataset = build_dataset(api, paths, args)
    out: dict[str, Any] = {"size": dataset.get_dataset_size()}
    if args.get("read", "ids") == "meta":
        out["columns"] = list(dataset.get_col_names())
        out["types"] = [str(np.dtype(t)) for t in dataset.output_types()]
        if args["source"] != "imagefolder" or args.get("kwargs", {}).get("decode", True):
            out["shapes"] = [list(s) for s in dataset.output_shapes()]
        if args["source"] == "imagefolder":
            out["class_indexing"] = dict(dataset.get_class_indexing())
        return out
    ids: list[int] = []
    labels: list[int] = []
    for row in dataset.create_dict_iterator(num_epochs=1, output_numpy=True):
        image = row["image"]
        ids.extend(mnist_ids(image) if args["source"] == "mnist" else hwc_ids(image))
        labels.append(int(row["label"]))
    if args.get("read") == "sorted":  # a shuffled epoch: compare the multisets
        ids, labels = sorted(ids), sorted(labels)
    out["ids"] = summarize_ids(ids)
    out["labels"] = summarize_ids(labels)
    return out
