"""TypeCast: cast an array to another dtype (offloadable)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mrecord.errors import WrongTypeError
from mrecord.transforms.base import BatchOperation

__all__ = ["TypeCast", "parse_dtype"]


def parse_dtype(value: object, name: str = "data_type") -> np.dtype[Any]:
    """A numpy dtype from a dtype, a type such as ``np.int32``, or a name such as ``"float32"``."""
    if isinstance(value, np.dtype):
        dtype: np.dtype[Any] = value
    elif isinstance(value, (str, type)):
        try:
            dtype = np.dtype(value)
        except TypeError as exc:
            raise WrongTypeError(
                f"Argument {name} with value {value!r} is not a data type; "
                f"use a numpy dtype such as np.int32 or 'float32'"
            ) from exc
    else:
        raise WrongTypeError(
            f"Argument {name} with value {value!r} is not of type [<class 'numpy.dtype'>, "
            f"<class 'type'>, <class 'str'>], but got {type(value)}."
        )
    if dtype.kind not in "biufcUS":
        raise WrongTypeError(
            f"Argument {name} must be a numeric, bool or string dtype, got {dtype}"
        )
    return dtype


class TypeCast(BatchOperation):
    """Cast the input to ``data_type`` (numpy ``astype`` semantics: floats truncate to ints).

    Example::

        >>> TypeCast(np.int32)(np.array([1.7, -2.2])).tolist()
        [1, -2]
    """

    def __init__(self, data_type: object) -> None:
        self.data_type = parse_dtype(data_type)

    def _params(self) -> dict[str, object]:
        return {"data_type": self.data_type.name}

    def _batch(self, batch: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        return batch.astype(self.data_type, copy=False)
