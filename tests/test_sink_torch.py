"""The torch delivery path (skipped without torch) and its ImportError without it."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

from mrecord.train import DeviceQueue, Model
from mrecord.train.testing import FakeDataset


def float_batches(epoch: int, index: int) -> tuple[Any, ...]:
    image = np.full((2, 3, 4, 4), index, dtype=np.float32)
    label = np.array([index, index + 1], dtype=np.int32)
    return image, label, np.array(["a", "b"])  # a string column stays numpy


def test_missing_torch_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    with pytest.raises(ImportError, match=r"pip install mrecord\[torch\]"):
        DeviceQueue(FakeDataset(2), device="cpu")
    with pytest.raises(ImportError, match=r"pip install mrecord\[torch\]"):
        Model(lambda *b: 0.0, device="cpu").train(1, FakeDataset(2), dataset_sink_mode=True)


@pytest.mark.torch
def test_cpu_device_delivers_tensors() -> None:
    torch = pytest.importorskip("torch")
    with DeviceQueue(FakeDataset(3, make_batch=float_batches), device="cpu", num_epochs=1) as q:
        batches = list(q)
    assert len(batches) == 3
    for i, (image, label, names) in enumerate(batches):
        assert isinstance(image, torch.Tensor) and image.dtype == torch.float32
        assert torch.equal(image, torch.full((2, 3, 4, 4), float(i)))
        assert label.tolist() == [i, i + 1]
        assert isinstance(names, np.ndarray)


@pytest.mark.torch
def test_cuda_device_delivers_tensors_in_both_modes() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    sums: list[float] = []

    def step(image: Any, label: Any, names: Any) -> Any:
        assert image.is_cuda and label.is_cuda
        sums.append(float(image.sum()))
        return image.mean()

    for sink in (True, False):
        sums.clear()
        Model(step, device="cuda").train(
            2, FakeDataset(4, make_batch=float_batches), dataset_sink_mode=sink
        )
        assert sums == [float(i * 2 * 3 * 4 * 4) for i in range(4)] * 2
