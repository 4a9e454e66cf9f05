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


class _FakeEvent:
    """A CUDA event stand-in: completed or not, and whether someone waited on it."""

    def __init__(self, completed: bool) -> None:
        self.completed = completed
        self.waited = False

    def query(self) -> bool:
        return self.completed

    def synchronize(self) -> None:
        self.waited = True
        self.completed = True


@pytest.mark.torch
def test_pinned_staging_reuses_a_buffer_only_once_its_copy_is_done() -> None:
    torch = pytest.importorskip("torch")
    from mrecord.train.delivery import PinnedStaging

    made: list[Any] = []

    def allocate(shape: tuple[int, ...], dtype: Any) -> Any:
        made.append(torch.empty(shape, dtype=dtype))
        return made[-1]

    staging = PinnedStaging(allocate, per_shape=2, max_shapes=2)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    first = staging.stage(a)
    second = staging.stage(a + 1)  # same batch, same shape: the first is still pending
    assert first is not second and len(made) == 2
    assert torch.equal(first, torch.from_numpy(a)) and torch.equal(second, torch.from_numpy(a + 1))
    busy, finished = _FakeEvent(False), _FakeEvent(True)
    staging.done(first, busy)
    staging.done(second, finished)
    assert staging.stage(a * 2) is second  # its copy is done: reused, not a new buffer
    staging.done(second, _FakeEvent(False))
    # Every buffer busy and the shape has its two: the oldest copy is waited for.
    third = staging.stage(a * 3)
    assert third is first and busy.waited and len(made) == 2
    assert torch.equal(third, torch.from_numpy(a * 3))


@pytest.mark.torch
def test_pinned_staging_copies_any_layout_and_keys_on_dtype_and_shape() -> None:
    torch = pytest.importorskip("torch")
    from mrecord.train.delivery import PinnedStaging

    staging = PinnedStaging(lambda shape, dtype: torch.empty(shape, dtype=dtype), max_shapes=2)
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    read_only = base.copy()
    read_only.flags.writeable = False
    strided = base[:, ::2]
    as_float = base.astype(np.float32)
    for value in (read_only, strided, as_float):
        staged = staging.stage(value)
        assert staged.dtype == torch.from_numpy(np.empty(0, dtype=value.dtype)).dtype
        assert np.array_equal(staged.numpy(), value)
        staging.done(staged, _FakeEvent(True))
    # Three shapes/dtypes through a two-shape cache: the least recently used was dropped,
    # so the read-only array's shape gets a fresh buffer again.
    again = staging.stage(read_only)
    assert np.array_equal(again.numpy(), read_only)


@pytest.mark.torch
def test_cuda_staging_buffers_never_leak_one_batch_into_another() -> None:
    """40 batches through 8 reused pinned buffers per shape, two columns of one shape
    each: every batch arrives on the device with its own values."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")

    def two_columns(epoch: int, index: int) -> tuple[Any, ...]:
        big = np.full((64, 3, 32, 32), index, dtype=np.float32)
        return big, big + 0.5, np.array([index], dtype=np.int64)

    got = []
    with DeviceQueue(
        FakeDataset(40, make_batch=two_columns), device="cuda", num_epochs=1, capacity=16
    ) as queue:
        for first, second, index in queue:
            assert first.is_cuda and second.is_cuda
            got.append((float(first.mean()), float(second.mean()), int(index)))
    assert got == [(float(i), i + 0.5, i) for i in range(40)]
