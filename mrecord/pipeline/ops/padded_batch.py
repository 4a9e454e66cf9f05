"""``padded_batch``: batch rows whose arrays differ in shape, padding them first (MindSpore 2.x).

``pad_info`` says how, per column: ``{name: (shape, value)}``. The rows of the
column are padded at the end of every dimension to ``shape`` with ``value``; a
None shape, or a None entry in it, means the largest size in the batch for that
dimension. Columns not named in a non-None ``pad_info`` are padded to the batch's
largest shape with 0; ``pad_info={}`` pads every column so; ``pad_info=None`` pads
nothing (the rows must already agree, as for ``batch``). A row larger than the
requested shape is an error naming the column, row and shapes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from mrecord.block import Block, ColumnValues
from mrecord.errors import ArgumentError, PipelineError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.ops.batch import BatchDataset

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["PadInfo", "PaddedBatchDataset", "pad_column"]

PadSpec = tuple[tuple[int | None, ...] | None, Any]
PadInfo = Mapping[str, tuple[Sequence[int | None] | None, Any]]


def _check_pad_info(pad_info: object) -> dict[str, PadSpec] | None:
    if pad_info is None:
        return None
    if not isinstance(pad_info, Mapping):
        raise WrongTypeError(
            f"pad_info must be a dict of column name to (shape, value), got {pad_info!r}"
        )
    checked: dict[str, PadSpec] = {}
    for name, spec in pad_info.items():
        if not isinstance(name, str) or not isinstance(spec, (tuple, list)) or len(spec) != 2:
            raise WrongTypeError(
                f"pad_info entries must be column name: (shape, pad_value), got {name!r}: {spec!r}"
            )
        shape, value = spec
        if shape is not None:
            if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
                raise WrongTypeError(
                    f"pad_info[{name!r}] shape must be a list or None, got {shape!r}"
                )
            for dim in shape:
                bad = isinstance(dim, bool) or not isinstance(dim, int) or dim < 1
                if dim is not None and bad:
                    raise ArgumentError(
                        f"pad_info[{name!r}] shape entries must be ints >= 1 or None, got {shape!r}"
                    )
            shape = tuple(shape)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
            raise WrongTypeError(f"pad_info[{name!r}] pad value must be a number, got {value!r}")
        checked[name] = (shape, value)
    return checked


def pad_column(
    values: ColumnValues,
    shape: tuple[int | None, ...] | None,
    value: Any,
    *,
    name: str,
    ids: np.ndarray,
) -> np.ndarray:
    """The rows of one column padded to one shape, stacked: ``(n, *shape)``."""
    arrays = [np.asarray(v) for v in values] if isinstance(values, list) else None
    if arrays is None:
        arr = np.asarray(values)
        ndim, dtype, largest = arr.ndim - 1, arr.dtype, arr.shape[1:]
    else:
        ndims = set(map(attrgetter("ndim"), arrays))
        if len(ndims) > 1:
            raise PipelineError(
                f"padded_batch: column {name!r} mixes arrays of {sorted(ndims)} dimensions "
                "in one batch; padding keeps the number of dimensions"
            )
        ndim = ndims.pop() if ndims else 0
        # the distinct dtypes, not every array: result_type of 256 arrays was a fifth of
        # a batch's padding
        dtypes = set(map(attrgetter("dtype"), arrays))
        dtype = np.result_type(*dtypes) if arrays else np.dtype(np.float64)
        shapes = _row_shapes(arrays, ndim)
        largest = tuple(shapes.max(axis=0).tolist()) if arrays else ()
    if dtype.kind not in "biuf":
        raise PipelineError(
            f"padded_batch: column {name!r} holds {dtype} values; only numeric arrays are padded "
            "(leave it out of pad_info, or batch it with per_batch_map)"
        )
    if shape is not None and len(shape) != ndim:
        raise PipelineError(
            f"padded_batch: pad_info shape {list(shape)} for column {name!r} has {len(shape)} "
            f"dimensions, its rows have {ndim}"
        )
    target = tuple(
        largest[d] if shape is None or shape[d] is None else int(shape[d])  # type: ignore[arg-type]
        for d in range(ndim)
    )
    out = np.full((len(values), *target), value, dtype=dtype)
    if arrays is None:  # one shape for every row: one copy for the whole column
        if any(got > want for got, want in zip(largest, target, strict=True)):
            raise _too_large(name, int(ids[0]), largest, target)
        block: tuple[slice, ...] = (slice(None), *(slice(0, d) for d in largest))
        out[block] = np.asarray(values)
        return out
    # Every row's fit checked at once (a Python step a row and dimension cost more than
    # its copy): 256 rows of float32[k, 3], 1.21 -> 0.46 ms a batch.
    over = (shapes > np.array(target, dtype=np.int64)).any(axis=1)
    if over.any():
        i = int(np.flatnonzero(over)[0])
        raise _too_large(name, int(ids[i]), arrays[i].shape, target)
    if ndim and bool((shapes[:, 1:] == np.array(target[1:], dtype=np.int64)).all()):
        for i, row in enumerate(arrays):  # only the first dimension differs
            out[i, : len(row)] = row
        return out
    for i, row in enumerate(arrays):
        index: tuple[int | slice, ...] = (i, *(slice(0, d) for d in row.shape))
        out[index] = row
    return out


def _row_shapes(arrays: list[np.ndarray], ndim: int) -> np.ndarray:
    """``(len(arrays), ndim)`` int64: every row's shape."""
    flat = itertools.chain.from_iterable(map(attrgetter("shape"), arrays))
    shapes = np.fromiter(flat, dtype=np.int64, count=len(arrays) * ndim)
    return shapes.reshape(len(arrays), ndim)


def _too_large(
    name: str, row_id: int, shape: tuple[int, ...], target: tuple[int, ...]
) -> PipelineError:
    return PipelineError(
        f"padded_batch: column {name!r} row {row_id} has shape {list(shape)}, larger than the "
        f"pad shape {list(target)}; raise the shape in pad_info or use None"
    )


class PaddedBatchDataset(BatchDataset):
    """The node ``dataset.padded_batch(...)`` makes (see the module docstring)."""

    def __init__(
        self,
        child: Dataset,
        batch_size: int,
        drop_remainder: bool = False,
        num_parallel_workers: int | None = None,
        pad_info: PadInfo | None = None,
    ) -> None:
        self.pad_info = _check_pad_info(pad_info)
        super().__init__(
            child,
            batch_size,
            drop_remainder=drop_remainder,
            num_parallel_workers=num_parallel_workers,
        )

    def _validate(self) -> None:
        super()._validate()
        names = self.child._column_names()
        unknown = sorted(set(self.pad_info or {}) - set(names))
        if unknown:
            raise PipelineError(
                f"{self!r}: pad_info names {unknown!r}, not columns of the dataset {names!r}"
            )

    def _describe(self) -> str:
        return (
            f"PaddedBatch(batch_size={self.batch_size}, drop_remainder={self.drop_remainder}, "
            f"pad_info={self.pad_info!r})"
        )

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        if self.pad_info is None:
            yield from super()._execute(ctx, epoch)
            return
        for rows in self._batches(ctx, epoch):
            batch: dict[str, ColumnValues] = {}
            for name, values in rows.columns.items():
                shape, value = self.pad_info.get(name, (None, 0))
                padded = pad_column(values, shape, value, name=name, ids=rows.row_ids)
                batch[name] = padded[None]  # one row holding the whole batch, as batch does
            yield Block(batch, rows.row_ids[:1])
