"""``GeneratorDataset``: rows from a user's Python object.

Three kinds of source (checked in this order):

- *random access* (``__getitem__`` and ``__len__``): rows are read by index in the
  order of a sampler (``mrecord.sampling.samplers``), so ``shuffle``, ``num_shards``
  / ``shard_id``, ``num_samples`` and ``sampler`` all work. As in MindSpore,
  ``shuffle=None`` means shuffled for such a source.
- *callable* (a generator function): called once per epoch for a fresh iterator;
- *iterable* (``__iter__``): ``iter(source)`` once per epoch.

Iterable sources cannot be shuffled, sharded or sampled: asking raises
:class:`~mrecord.errors.ArgumentError` (MindSpore silently ignores it, a known FAQ);
``num_samples`` takes the first rows. An item is a tuple with one value per column
(a single value is accepted for one column). An exception in the user's code is
re-raised as :class:`~mrecord.errors.OperationError` naming the index (or item
number), chained to the original so its traceback shows.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mrecord.arguments import check_workers
from mrecord.block import Block, ColumnValues
from mrecord.errors import ArgumentError, OperationError, PipelineError, WrongTypeError
from mrecord.pipeline.engine.columns import as_name_list, column_from_values
from mrecord.pipeline.sources.base import SourceDataset
from mrecord.pipeline.sources.random_access import replace_sampler
from mrecord.pipeline.sources.schema import Schema
from mrecord.pool import ThreadPool, ordered_map
from mrecord.sampling import (
    PKSampler,
    Sampler,
    SubsetSampler,
    chain_sampler,
    sampler_from_args,
)

if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext

__all__ = ["GeneratorDataset"]

BLOCK_ROWS = 64


def _refuse_processes(python_multiprocessing: bool, workers: int | None) -> None:
    """``python_multiprocessing=True`` is refused: sources are read on threads here."""
    if not isinstance(python_multiprocessing, bool):
        raise WrongTypeError(
            f"python_multiprocessing must be a bool, got {python_multiprocessing!r}"
        )
    if python_multiprocessing and (workers or 1) > 1:
        raise ArgumentError(
            "GeneratorDataset(python_multiprocessing=True) is not supported: mrecord reads "
            "a source on num_parallel_workers threads. Pass python_multiprocessing=False, and "
            "put heavy per-row Python work in .map(fn, python_multiprocessing=True, "
            "num_parallel_workers=N), which runs it in processes"
        )


def _is_random_access(source: object) -> bool:
    return hasattr(source, "__getitem__") and hasattr(source, "__len__")


class GeneratorDataset(SourceDataset):
    """A pipeline source over a user's Python object (see the module docstring)."""

    def __init__(
        self,
        source: Any,
        column_names: str | Sequence[str] | None = None,
        *,
        column_types: Sequence[Any] | None = None,
        schema: Schema | None = None,
        num_samples: int | None = None,
        num_parallel_workers: int | None = 1,
        shuffle: bool | None = None,
        sampler: Any = None,
        num_shards: int | None = None,
        shard_id: int | None = None,
        python_multiprocessing: bool = False,
    ) -> None:
        super().__init__()
        if schema is not None:
            if not isinstance(schema, Schema):
                raise WrongTypeError(f"schema must be an mrecord.Schema, got {schema!r}")
            if column_names is None:
                column_names = schema.column_names()
            if column_types is None:
                column_types = schema.column_types()
        names = as_name_list(column_names, "column_names")
        if names is None:
            raise ArgumentError(
                "Neither columns_names nor schema are provided: give column_names, one name "
                "per value of an item"
            )
        _refuse_processes(python_multiprocessing, num_parallel_workers)
        self.source = source
        self.column_names = names
        self.column_types = None if column_types is None else [np.dtype(t) for t in column_types]
        if self.column_types is not None and len(self.column_types) != len(names):
            raise ArgumentError(
                f"column_types has {len(self.column_types)} entries for {len(names)} columns "
                f"{names!r}"
            )
        self.num_parallel_workers = check_workers(num_parallel_workers) or 1
        if num_samples is not None and (
            isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 0
        ):
            raise ArgumentError(f"num_samples must be an int >= 0, got {num_samples!r}")
        self.num_samples = num_samples or None
        self.random_access = _is_random_access(source)
        if not self.random_access:
            if not (callable(source) or isinstance(source, Iterable)):
                raise WrongTypeError(
                    "source must be random-access (__getitem__ and __len__), a generator "
                    f"function or an iterable, got {source!r} ({type(source).__name__})"
                )
            asked = [
                name
                for name, value in (
                    ("shuffle=True", shuffle is True),
                    ("num_shards/shard_id", num_shards is not None or shard_id is not None),
                    ("sampler", sampler is not None),
                )
                if value
            ]
            if asked:
                raise ArgumentError(
                    f"GeneratorDataset: {', '.join(asked)} needs a random-access source "
                    f"(with __getitem__ and __len__), but {source!r} can only be iterated; "
                    "add __getitem__/__len__ to it, or drop the argument (MindSpore ignores it "
                    "silently)"
                )
            self._sampler: Any = None
        else:
            self._sampler = self._make_sampler(shuffle, num_shards, shard_id, sampler)
        self.shuffle_arg = shuffle
        self.num_shards = num_shards
        self.shard_id = shard_id

    def _make_sampler(
        self, shuffle: bool | None, num_shards: int | None, shard_id: int | None, sampler: Any
    ) -> Any:
        if shuffle is False and num_shards is None and shard_id is None and sampler is None:
            return None  # sequential: no sampler needed
        if sampler is not None and not isinstance(sampler, Sampler):
            if isinstance(sampler, (str, bytes)) or not isinstance(sampler, Iterable):
                raise WrongTypeError(
                    f"sampler must be a sampler or an iterable of indices, got {sampler!r}"
                )
            sampler = SubsetSampler(list(sampler))
        _refuse_pk(sampler)
        num_samples = self.num_samples
        if sampler is not None and num_samples is not None:
            raise ArgumentError("sampler and num_samples cannot be specified at the same time.")
        return sampler_from_args(
            shuffle=shuffle,
            num_shards=num_shards,
            shard_id=shard_id,
            num_samples=num_samples,
            sampler=sampler,
        )

    def _use_sampler(self, sampler: Any) -> None:
        if not self.random_access:
            super()._use_sampler(sampler)
        _refuse_pk(sampler)
        self._sampler = replace_sampler(self._sampler, sampler)

    def _add_sampler(self, new_sampler: Sampler) -> None:
        """``Dataset.add_sampler``: ``new_sampler`` samples this source's ids."""
        if not self.random_access:
            raise ArgumentError(
                f"{self!r}: add_sampler needs a random-access source (__getitem__, __len__)"
            )
        self._sampler = chain_sampler(new_sampler, self._sampler)

    # ------------------------------------------------------------------ source contract
    def _source_column_names(self) -> list[str]:
        return list(self.column_names)

    def _source_len(self) -> int:
        return len(self.source)

    def _source_num_rows(self) -> int:
        if self.random_access:
            total = self._source_len()
            if self._sampler is not None:
                return int(self._sampler.num_rows_for(total))
            return total if self.num_samples is None else min(total, self.num_samples)
        if hasattr(self.source, "__len__"):
            total = len(self.source)
            return total if self.num_samples is None else min(total, self.num_samples)
        return -1

    def _describe(self) -> str:
        parts = [f"source={_short(self.source)}", f"column_names={self.column_names!r}"]
        for name, value in (
            ("shuffle", self.shuffle_arg),
            ("num_shards", self.num_shards),
            ("shard_id", self.shard_id),
            ("num_samples", self.num_samples),
        ):
            if value is not None:
                parts.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def _iter_blocks(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        if self.random_access:
            yield from self._iter_indexed(ctx, epoch)
        else:
            yield from self._iter_items(epoch)

    # ------------------------------------------------------------------ random access
    def _order_chunks(self, seed: int, epoch: int) -> Iterator[np.ndarray]:
        total = self._source_len()
        if self._sampler is None:
            stop = total if self.num_samples is None else min(total, self.num_samples)
            for start in range(0, stop, BLOCK_ROWS):
                yield np.arange(start, min(stop, start + BLOCK_ROWS), dtype=np.int64)
            return
        order = self._sampler.build_order([total], seed=seed, epoch=epoch)
        yield from order.iter_chunks(BLOCK_ROWS)

    def _read_indices(self, ids: np.ndarray) -> Block:
        """Rows at ``ids`` as a block (overridden by vectorized sources)."""
        rows = []
        for i in ids.tolist():
            try:
                item = self.source[i]
            except Exception as exc:
                raise OperationError(
                    f"{self!r}: the source raised {type(exc).__name__}: {exc} at index {i} "
                    "(source[index]); see the chained traceback for where"
                ) from exc
            rows.append(self._split_item(item, f"index {i}"))
        return self._make_block(rows, ids)

    def _iter_indexed(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        chunks = self._order_chunks(ctx.seed, epoch)
        if self.num_parallel_workers == 1:
            for ids in chunks:
                yield self._read_indices(ids)
            return
        workers = self.num_parallel_workers
        pool = ctx.pool(self, lambda: ThreadPool(self._read_indices, workers, "mrecord-generator"))
        for _ids, block in ordered_map(pool, chunks, 2 * workers, ctx.stop):
            yield block

    # ------------------------------------------------------------------ iterables
    def _iter_items(self, epoch: int) -> Iterator[Block]:
        source = self.source
        if callable(source) and not isinstance(source, Iterable):
            items: Any = source()
        else:
            items = iter(source)
            if items is source and epoch > 0:
                raise PipelineError(
                    f"{self!r}: the source is a one-shot iterator and epoch {epoch} needs it "
                    "again; pass the generator function (not its result) or a re-iterable object"
                )
        limit = self.num_samples
        rows: list[list[Any]] = []
        start = 0
        counter: Iterator[int] = itertools.count() if limit is None else iter(range(limit))
        it = iter(items)
        for k in counter:
            try:
                item = next(it)
            except StopIteration:
                break
            except Exception as exc:
                raise OperationError(
                    f"{self!r}: the source raised {type(exc).__name__}: {exc} while producing "
                    f"item {k}; see the chained traceback for where"
                ) from exc
            rows.append(self._split_item(item, f"item {k}"))
            if len(rows) == BLOCK_ROWS:
                yield self._make_block(rows, np.arange(start, start + len(rows), dtype=np.int64))
                start += len(rows)
                rows = []
        if rows:
            yield self._make_block(rows, np.arange(start, start + len(rows), dtype=np.int64))

    # ------------------------------------------------------------------ helpers
    def _split_item(self, item: Any, where: str) -> list[Any]:
        width = len(self.column_names)
        if isinstance(item, (tuple, list)) and not (width == 1 and isinstance(item, list)):
            values = list(item)
        else:
            values = [item]
        if len(values) != width:
            raise PipelineError(
                f"{self!r}: {where} has {len(values)} value(s) but column_names has {width} "
                f"({self.column_names!r}); return a tuple with one value per column"
            )
        return values

    def _make_block(self, rows: list[list[Any]], ids: np.ndarray) -> Block:
        cols: dict[str, ColumnValues] = {}
        for k, name in enumerate(self.column_names):
            values = [row[k] for row in rows]
            if self.column_types is not None:
                dtype = self.column_types[k]
                values = [np.asarray(v, dtype=dtype) for v in values]
            cols[name] = column_from_values(values)
        return Block(cols, np.asarray(ids, dtype=np.int64))


def _refuse_pk(sampler: Any) -> None:
    if isinstance(sampler, PKSampler):
        raise ArgumentError(
            "GeneratorDataset does not support PKSampler (as MindSpore): choose the rows "
            "per class in your source's __getitem__, or use MindDataset"
        )


def _short(source: object) -> str:
    text = repr(source) if not isinstance(source, np.ndarray) else f"array{source.shape}"
    return text if len(text) <= 60 else text[:57] + "..."
