"""RandomApply and RandomChoice: random selection among ops, from the row's seed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.transforms.base import TensorOperation
from mrecord.transforms.compose import Compose
from mrecord.transforms.seeding import derive_seed
from mrecord.transforms.validators import check_float

__all__ = ["RandomApply", "RandomChoice"]


def _checked_ops(transforms: object) -> list[Callable[..., Any]]:
    if not isinstance(transforms, (list, tuple)):
        raise WrongTypeError(
            f"Argument transforms with value {transforms!r} is not of type "
            f"[<class 'list'>, <class 'tuple'>], but got {type(transforms)}."
        )
    if not transforms:
        raise ArgumentError("transforms list is empty.")
    for i, op in enumerate(transforms):
        if not callable(op):
            raise WrongTypeError(f"transforms[{i}] is not callable: {op!r}")
    return list(transforms)


class RandomApply(TensorOperation):
    """Apply all of ``transforms`` in order (as :class:`Compose`) with probability ``prob``,
    else return the input unchanged. The draw comes from the row's seed.

    Example::

        >>> import numpy as np
        >>> RandomApply([TypeCast(np.float32)], prob=1.0)(np.array([1, 2])).dtype
        dtype('float32')
    """

    is_random: ClassVar[bool] = True
    num_inputs = -1

    def __init__(self, transforms: Sequence[Callable[..., Any]], prob: float = 0.5) -> None:
        self.transforms = _checked_ops(transforms)
        self.prob = check_float(prob, "prob", 0.0, 1.0)
        self._compose = Compose(self.transforms)

    def _params(self) -> dict[str, object]:
        return {"transforms": self.transforms, "prob": self.prob}

    def _compute(self, *arrays: Any, seed: int) -> Any:
        u = float(self._uniforms(np.array([seed], dtype=np.uint64), 1)[0, 0])
        if u >= self.prob:
            return arrays[0] if len(arrays) == 1 else arrays
        return self._compose(*arrays, seed=derive_seed(seed, 1))


class RandomChoice(TensorOperation):
    """Apply one of ``transforms``, chosen uniformly from the row's seed.

    Example::

        >>> import numpy as np
        >>> RandomChoice([TypeCast(np.int64)])(np.array([1, 2], np.int32)).dtype
        dtype('int64')
    """

    is_random: ClassVar[bool] = True
    num_inputs = -1

    def __init__(self, transforms: Sequence[Callable[..., Any]]) -> None:
        self.transforms = _checked_ops(transforms)

    def _params(self) -> dict[str, object]:
        return {"transforms": self.transforms}

    def _compute(self, *arrays: Any, seed: int) -> Any:
        u = float(self._uniforms(np.array([seed], dtype=np.uint64), 1)[0, 0])
        op = self.transforms[min(int(u * len(self.transforms)), len(self.transforms) - 1)]
        return Compose([op])(*arrays, seed=derive_seed(seed, 1))
