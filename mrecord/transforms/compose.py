"""Compose: run a list of ops as one op."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.transforms.base import TensorOperation
from mrecord.transforms.seeding import derive_seed

__all__ = ["Compose"]


def _is_random(op: object) -> bool:
    return bool(getattr(op, "is_random", False))


class Compose(TensorOperation):
    """Apply ``transforms`` in order; an op returning a tuple feeds all its values to the next.

    Random ops inside get their own sub-seed derived from the row seed and their position,
    so two random ops in one Compose draw independent parameters. Plain Python callables are
    called without a seed.

    Example::

        >>> from mrecord import vision
        >>> op = Compose([vision.Rescale(1 / 255, 0), vision.HWC2CHW()])
    """

    num_inputs = -1  # any number: passed to the first op

    def __init__(self, transforms: Sequence[Callable[..., Any]]) -> None:
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
        self.transforms = list(transforms)

    @property
    def is_random(self) -> bool:  # type: ignore[override]
        """True when any op inside is random."""
        return any(_is_random(op) for op in self.transforms)

    def _params(self) -> dict[str, object]:
        return {"transforms": self.transforms}

    def __call__(self, *arrays: Any, seed: int | None = None) -> Any:
        """Apply every op in order to ``arrays``."""
        if not arrays:
            raise WrongTypeError("Compose takes at least 1 input array, got 0")
        values: tuple[Any, ...] = arrays
        for i, op in enumerate(self.transforms):
            if _is_random(op):
                sub_seed = None if seed is None else derive_seed(seed, i)
                result = op(*values, seed=sub_seed)
            else:
                result = op(*values)
            values = result if isinstance(result, tuple) else (result,)
        return values[0] if len(values) == 1 else values
