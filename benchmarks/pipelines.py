"""The two issue-4 training pipelines, written once against MindSpore's dataset API.

mrecord mirrors MindSpore's names, so the same function builds the pipeline on either
library: pass an :class:`Api` holding ``MindDataset`` and the ``vision`` / ``transforms``
modules of the library under test (see :func:`mrecord_api` and :func:`mindspore_api`).
This module imports neither library at import time, so it also loads in MindSpore's
virtual environment.

- CIFAR-like: ``TypeCast`` the label; bytes -> HWC uint8; ``RandomCrop(32, padding=4)``,
  ``RandomHorizontalFlip``, ``Rescale(1/255, 0)``, ``Normalize``, ``HWC2CHW``;
  ``batch(256, drop_remainder=True)``.
- JPEG: ``RandomCropDecodeResize(224)``, ``RandomHorizontalFlip``, ``Normalize``,
  ``HWC2CHW``; ``batch(64)``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "CIFAR_BATCH",
    "JPEG_BATCH",
    "Api",
    "bytes_to_hwc",
    "cifar_pipeline",
    "jpeg_pipeline",
    "mindspore_api",
    "mrecord_api",
]

CIFAR_BATCH = 256
JPEG_BATCH = 64
CIFAR_MEAN = [0.4914, 0.4822, 0.4465]
CIFAR_STD = [0.2470, 0.2435, 0.2616]
IMAGENET_MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
IMAGENET_STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


@dataclass(frozen=True)
class Api:
    """The parts of a dataset library a pipeline needs (MindSpore's names)."""

    name: str
    MindDataset: Any  # mirrors the library's class name
    vision: Any
    transforms: Any
    supports_offload: bool


def mrecord_api() -> Api:
    """mrecord's MindDataset, ``mrecord.vision`` and ``mrecord.transforms``."""
    import mrecord
    import mrecord.transforms
    import mrecord.vision

    return Api("mrecord", mrecord.MindDataset, mrecord.vision, mrecord.transforms, True)


def mindspore_api() -> Api:
    """MindSpore's ``mindspore.dataset`` equivalents (offload is not passed to MindSpore)."""
    # import_module: MindSpore lives in another virtual environment, without type stubs.
    msds = importlib.import_module("mindspore.dataset")
    mstransforms = importlib.import_module("mindspore.dataset.transforms")
    msvision = importlib.import_module("mindspore.dataset.vision")
    return Api("mindspore", msds.MindDataset, msvision, mstransforms, False)


def bytes_to_hwc(image: Any) -> np.ndarray:
    """A stored 3,072-byte CIFAR image (``bytes`` or a uint8 array) as a 32x32x3 uint8 array."""
    return np.frombuffer(image, dtype=np.uint8).reshape(32, 32, 3)


def _map_kwargs(api: Api, workers: int, offload: bool | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"num_parallel_workers": workers}
    if api.supports_offload and offload is not None:
        kwargs["offload"] = offload
    return kwargs


def cifar_pipeline(api: Api, path: str, workers: int = 2, offload: bool | None = None) -> Any:
    """The CIFAR-like training pipeline over the dataset at ``path``."""
    v, t = api.vision, api.transforms
    ds = api.MindDataset(
        path, columns_list=["image", "label"], shuffle=True, num_parallel_workers=workers
    )
    ds = ds.map(t.TypeCast(np.int32), input_columns="label", num_parallel_workers=workers)
    ds = ds.map(bytes_to_hwc, input_columns="image", num_parallel_workers=workers)
    ops = [
        v.RandomCrop(32, padding=4),
        v.RandomHorizontalFlip(),
        v.Rescale(1.0 / 255.0, 0.0),
        v.Normalize(mean=CIFAR_MEAN, std=CIFAR_STD),
        v.HWC2CHW(),
    ]
    ds = ds.map(ops, input_columns="image", **_map_kwargs(api, workers, offload))
    return ds.batch(CIFAR_BATCH, drop_remainder=True)


def jpeg_pipeline(api: Api, path: str, workers: int = 2, offload: bool | None = None) -> Any:
    """The JPEG training pipeline over the dataset at ``path``."""
    v = api.vision
    ds = api.MindDataset(
        path, columns_list=["image", "label"], shuffle=True, num_parallel_workers=workers
    )
    ops = [
        v.RandomCropDecodeResize(224),
        v.RandomHorizontalFlip(),
        v.Normalize(mean=IMAGENET_MEAN, std=IMAGENET_STD),
        v.HWC2CHW(),
    ]
    ds = ds.map(ops, input_columns="image", **_map_kwargs(api, workers, offload))
    return ds.batch(JPEG_BATCH)


PIPELINES = {"cifar": cifar_pipeline, "jpeg": jpeg_pipeline}
"""Workload name -> pipeline builder."""
