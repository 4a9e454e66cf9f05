"""``Tensor``: what the iterators yield with the default ``output_numpy=False``.

MindSpore's iterators yield ``mindspore.Tensor`` by default, and tutorial code calls
``row["image"].asnumpy()``. mrecord has no device tensors, so its ``Tensor`` is a thin
``numpy.ndarray`` subclass: every numpy operation, ``np.asarray``, pickling and passing to
worker processes work as on a plain array, and ``asnumpy()`` / ``numpy()`` return the plain
array (a view, no copy). ``output_numpy=True`` yields plain ``numpy.ndarray`` values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mrecord.errors import WrongTypeError

__all__ = ["Tensor", "as_tensor"]


class Tensor(np.ndarray):  # type: ignore[type-arg]
    """A numpy array with MindSpore ``Tensor``'s ``asnumpy()``.

    ``Tensor(data, dtype=None)`` builds one from anything ``np.asarray`` accepts
    (``mindspore.Tensor(np_array)`` lines need only the import changed).
    """

    def __new__(cls, input_data: Any = None, dtype: Any = None) -> Tensor:
        if input_data is None:
            raise WrongTypeError("Tensor needs input_data (an array, a list or a number)")
        return np.asarray(input_data, dtype=dtype).view(cls)

    def asnumpy(self) -> np.ndarray:
        """The values as a plain ``numpy.ndarray`` (a view, no copy)."""
        return self.view(np.ndarray)

    def numpy(self) -> np.ndarray:
        """Same as :meth:`asnumpy` (torch's and newer MindSpore's spelling)."""
        return self.view(np.ndarray)

    def __repr__(self) -> str:
        return "Tensor(" + repr(self.view(np.ndarray))[len("array(") :]


def as_tensor(value: Any) -> Any:
    """``value`` (an iterator output) as a :class:`Tensor`; non-array values pass through."""
    if isinstance(value, np.ndarray):
        return value.view(Tensor)
    return value
