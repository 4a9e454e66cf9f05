"""The op contract shared by every transform in ``mrecord.vision`` and ``mrecord.transforms``.

- ``op(*arrays, seed=None)`` runs eagerly on numpy arrays (HWC images), as in MindSpore, and
  is what ``dataset.map(operations=[...])`` calls per row.
- ``op.is_random``: random ops take their parameters from the per-row ``seed`` (the pipeline
  passes one per row); an eager call without a seed draws one from
  :func:`mrecord.transforms.seeding.next_eager_seed`. Other ops accept and ignore ``seed``.
- ``op.batchable``: the op has ``apply_batch(batch, seeds)``, the same computation vectorized
  over a batch ``(N, ...)``; for every row ``i``,
  ``op(batch[i], seed=seeds[i]) == op.apply_batch(batch, seeds)[i]``. Both paths run the same
  batch code (a single row is a batch of one), which is what makes that hold exactly. A map
  runs a batchable op once per chunk of rows when the rows are stacked in one array.
- ``op.offloadable``: a batchable op that may also be moved after ``batch`` (offload): it must
  accept rows of any (stacked) shape, so ops that make equal-size rows out of unequal ones,
  such as ``RandomCrop``, are batchable but not offloadable.
- ``repr(op)`` shows the op and its arguments, e.g. ``Normalize(mean=[...], std=[...])``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from mrecord.errors import WrongTypeError
from mrecord.transforms.seeding import (
    as_seed_array,
    next_eager_seed,
    normalize_seed,
    stream_salt,
    uniforms,
)

__all__ = ["BatchOperation", "TensorOperation", "to_array"]


def to_array(value: object, op_name: str) -> np.ndarray:
    """``value`` as a numpy array (PIL images and nested lists are converted)."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bytes, bytearray, memoryview, str)):
        raise WrongTypeError(
            f"{op_name}: the input should be a numpy array, got {type(value).__name__} "
            f"(decode encoded images with mrecord.vision.Decode first)"
        )
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise WrongTypeError(
            f"{op_name}: the input should be a numpy array, got {type(value).__name__}"
        ) from exc


class TensorOperation:
    """Base class of every op: eager ``__call__``, ``is_random``, ``offloadable``, ``repr``."""

    is_random: ClassVar[bool] = False
    batchable: ClassVar[bool] = False
    offloadable: ClassVar[bool] = False
    num_inputs: ClassVar[int] = 1
    _salt: ClassVar[int] = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._salt = stream_salt(cls.__name__)

    def __call__(self, *arrays: Any, seed: int | None = None) -> Any:
        """Apply the op to ``arrays`` (numpy); random ops use ``seed`` for their parameters."""
        if self.num_inputs >= 0 and len(arrays) != self.num_inputs:
            raise WrongTypeError(
                f"{type(self).__name__} takes {self.num_inputs} input array(s), got {len(arrays)}"
            )
        row_seed = 0
        if self.is_random:
            row_seed = next_eager_seed() if seed is None else normalize_seed(seed)
        elif seed is not None:
            normalize_seed(seed)  # still reject nonsense such as a str seed
        return self._compute(*arrays, seed=row_seed)

    def _compute(self, *arrays: Any, seed: int) -> Any:
        raise NotImplementedError

    def _params(self) -> dict[str, object]:
        """The constructor arguments shown by ``repr``."""
        return {}

    def _uniforms(self, seeds: np.ndarray, count: int) -> np.ndarray:
        """``(len(seeds), count)`` uniforms from this op's own stream (salted by class name)."""
        return uniforms(seeds, count, self._salt)

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={value!r}" for name, value in self._params().items())
        return f"{type(self).__name__}({args})"


class BatchOperation(TensorOperation):
    """A batchable (by default offloadable) op: one vectorized ``_batch`` serves both per-row
    calls and ``apply_batch``.

    Subclasses implement ``_batch(batch, seeds)`` on an array of shape ``(N, *row_shape)`` and
    may override ``_check_row(shape, dtype)`` to validate one row's shape and dtype.
    """

    batchable: ClassVar[bool] = True
    offloadable: ClassVar[bool] = True

    def _compute(self, *arrays: Any, seed: int) -> Any:
        img = to_array(arrays[0], type(self).__name__)
        self._check_row(img.shape, img.dtype)
        seeds = np.array([seed], dtype=np.uint64)
        return self._batch(img[np.newaxis], seeds)[0, ...]  # [0, ...]: a 0-d row stays an array

    def apply_batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """Apply the op to every row of ``batch`` ``(N, ...)`` with row ``i`` using ``seeds[i]``."""
        arr = to_array(batch, type(self).__name__)
        if arr.ndim < 1:
            name = type(self).__name__
            raise WrongTypeError(f"{name}.apply_batch needs a batch (N, ...), got a scalar")
        seed_arr = as_seed_array(seeds, arr.shape[0])
        self._check_row(arr.shape[1:], arr.dtype)
        return self._batch(arr, seed_arr)

    def _check_row(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        """Validate one row's shape and dtype (default: anything goes)."""

    def _batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        raise NotImplementedError
