"""MindSpore's samplers, as pure functions of (file row counts, seed, epoch) to an Order.

The contract the reader and pipeline call::

    order = sampler.build_order(file_row_counts, seed=config.get_seed(), epoch=e,
                                labels=lambda: class_column_values)   # an Order
    sampler.num_rows_for(total_rows)      # rows per epoch, without reading data
    sampler.get_num_samples()             # MindSpore's rule (with child samplers)

A child sampler's output is its parent's input: ``parent.add_child(child)`` makes the
parent sample *positions of the child's order* (MindSpore's semantics). Random
samplers draw from a numpy Generator (or a keyed permutation) seeded with a hash of
``(seed, epoch)``, so every epoch differs and every rank agrees.

:func:`mrecord.sampling.arguments.sampler_from_args` turns a dataset's arguments into
one of these samplers.

Differences from MindSpore (documented in ``docs/SHUFFLE_AND_SAMPLERS.md``):

- ``shuffle=True`` with ``num_samples`` samples *without* replacement (MindSpore
  samples with replacement).
- :class:`PKSampler` returns ``num_val`` distinct rows per class when the class has
  that many (MindSpore returned one row repeated).
- ``num_rows_for`` of a PKSampler needs the labels (``labels=``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from numbers import Number
from typing import Any

import numpy as np
import numpy.typing as npt

from mrecord.arguments import is_int, type_error
from mrecord.errors import ArgumentError, SamplerError, UnsupportedArgumentError, WrongTypeError
from mrecord.sampling.order import (
    ArrayOrder,
    ComposedOrder,
    IdArray,
    Order,
    PartitionedOrder,
    PermutationOrder,
    RangeOrder,
    SliceOrder,
)
from mrecord.sampling.permutation import derive_key
from mrecord.sampling.sharding import check_padding, check_shards, shard_size, split_order
from mrecord.sampling.shuffle import (
    DEFAULT_ADAPTIVE_THRESHOLD,
    DEFAULT_PARTIAL_WINDOW,
    Shuffle,
    parse_shuffle,
    shuffle_order,
)
from mrecord.sampling.shuffle._common import Counts, check_counts, check_option, check_seed_epoch
from mrecord.sampling.shuffle.block import BlockLayout, BlockOrder

__all__ = [
    "DatasetSampler",
    "DistributedSampler",
    "LabelsFn",
    "PKSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "SubsetSampler",
    "WeightedRandomSampler",
]

LabelsFn = Callable[[], npt.ArrayLike]
"""Returns the ``class_column`` value of every row (only PKSampler calls it)."""

# One wording for a wrong type across mrecord (MindSpore's): the ground-floor checks.
int_type_error = type_error


def _check_num_samples(num_samples: object, *, positive: bool = False) -> int | None:
    if num_samples is None:
        return None
    if not is_int(num_samples):
        raise int_type_error("num_samples", num_samples)
    value: int = int(num_samples)  # type: ignore[call-overload]
    if value < 0 or (positive and value == 0):
        kind = "positive" if positive else "non-negative"
        raise ArgumentError(
            f"num_samples should be a {kind} integer value, but got num_samples: {value}."
        )
    return value


def _limit(order: Order, num_samples: int | None) -> Order:
    """The first ``num_samples`` ids of ``order`` (``None`` or 0: all of them)."""
    if not num_samples or num_samples >= len(order):
        return order
    return SliceOrder(order, 0, num_samples)


def _capped(rows: int, num_samples: int | None) -> int:
    return min(rows, num_samples) if num_samples else rows


def _rng(seed: int, epoch: int, purpose: str) -> np.random.Generator:
    return np.random.default_rng(derive_key(seed, epoch, purpose))


class Sampler(ABC):
    """Base of every sampler: child samplers, ``get_num_samples`` and the order contract.

    ``num_samples=None`` (or 0, as in MindSpore) means all rows.
    """

    def __init__(self, num_samples: int | None = None) -> None:
        self.num_samples: int | None = _check_num_samples(num_samples)
        self.child_sampler: Sampler | None = None

    # ------------------------------------------------------------ MindSpore API
    def add_child(self, sampler: Sampler) -> None:
        """Add a child: this sampler then samples from the child's output ids."""
        if not isinstance(sampler, Sampler):
            raise WrongTypeError(
                f"sampler must be a mrecord sampler (SequentialSampler, RandomSampler, ...), "
                f"got {sampler!r} ({type(sampler).__name__})"
            )
        if self.child_sampler is not None:
            raise SamplerError("Cannot add child sampler, this sampler already has a child.")
        node: Sampler | None = sampler
        while node is not None:
            if node is self:
                raise SamplerError("Cannot add a sampler as a child of itself (a cycle).")
            node = node.child_sampler
        self._check_child(sampler)
        self.child_sampler = sampler

    def get_child(self) -> Sampler | None:
        """The child sampler, or None."""
        return self.child_sampler

    def get_num_samples(self) -> int | None:
        """``num_samples`` combined with the child's, by MindSpore's rule.

        Both set: the minimum; one set: that one; neither: None.
        """
        if self.child_sampler is None:
            return self.num_samples
        child = self.child_sampler.get_num_samples()
        if self.num_samples is not None:
            return self.num_samples if child is None else min(self.num_samples, child)
        return child

    # ------------------------------------------------------------ order contract
    def build_order(
        self,
        file_row_counts: Counts,
        *,
        seed: int,
        epoch: int,
        labels: LabelsFn | None = None,
        layout: BlockLayout | None = None,
    ) -> Order:
        """This epoch's order of global row ids (a pure function of the arguments).

        ``layout`` (page boundaries and block sizes of the rows) is used by
        ``Shuffle.BLOCK`` and ``Shuffle.ADAPTIVE``; it applies to the rows, so a parent
        sampler passes it to its child and orders the child's positions without it.
        """
        counts = check_counts(file_row_counts)
        seed, epoch = check_seed_epoch(seed, epoch)
        if self.child_sampler is None:
            return self._layout_order(counts, seed, epoch, labels, layout)
        child_order = self.child_sampler.build_order(
            counts, seed=derive_key(seed, "child"), epoch=epoch, labels=labels, layout=layout
        )
        child_labels: LabelsFn | None = None
        if labels is not None:
            parent_labels = labels

            def child_labels() -> npt.ArrayLike:
                return np.asarray(parent_labels())[child_order.to_array()]

        own = self._order(np.array([len(child_order)]), seed, epoch, child_labels)
        return ComposedOrder(own, child_order)

    def num_rows_for(self, total_rows: int, *, labels: LabelsFn | None = None) -> int:
        """Rows this sampler yields per epoch from a dataset of ``total_rows`` rows."""
        if not is_int(total_rows) or total_rows < 0:
            raise ArgumentError(f"total_rows must be an int >= 0, got {total_rows!r}")
        rows = int(total_rows)
        if self.child_sampler is not None:
            rows = self.child_sampler.num_rows_for(rows, labels=labels)
        return self._count(rows)

    # ------------------------------------------------------------ subclass hooks
    def _layout_order(
        self,
        counts: IdArray,
        seed: int,
        epoch: int,
        labels: LabelsFn | None,
        layout: BlockLayout | None,
    ) -> Order:
        """:meth:`_order` with the rows' block layout (only the shuffle modes use it)."""
        return self._order(counts, seed, epoch, labels)

    @abstractmethod
    def _order(self, counts: IdArray, seed: int, epoch: int, labels: LabelsFn | None) -> Order:
        """The order over ``sum(counts)`` rows laid out as files of ``counts`` rows."""

    @abstractmethod
    def _count(self, total_rows: int) -> int:
        """Rows yielded from ``total_rows`` input rows."""

    def _check_child(self, child: Sampler) -> None:
        """Reject a child this sampler cannot sample from (default: accept)."""
        if isinstance(child, _ModeSampler) and child.mode is Shuffle.PARTIAL:
            raise SamplerError("A child sampler's shuffle cannot be Shuffle.PARTIAL.")

    def __repr__(self) -> str:
        child = f", child={self.child_sampler!r}" if self.child_sampler else ""
        return f"{type(self).__name__}(num_samples={self.num_samples!r}{child})"


# --------------------------------------------------------------------- sequential


class SequentialSampler(Sampler):
    """Rows in order from ``start_index`` (default 0), at most ``num_samples`` of them."""

    def __init__(self, start_index: int | None = None, num_samples: int | None = None) -> None:
        if start_index is not None:
            if not is_int(start_index):
                raise int_type_error("start_index", start_index)
            if start_index < 0:
                raise ArgumentError(
                    "start_index should be a positive integer value or 0, "
                    f"but got start_index: {start_index}."
                )
        super().__init__(num_samples)
        self.start_index = start_index

    def _order(self, counts: IdArray, seed: int, epoch: int, labels: LabelsFn | None) -> Order:
        n = int(counts.sum())
        start = int(self.start_index or 0)
        if n and start >= n:
            raise SamplerError(
                f"Invalid parameter, start_index must be less than the number of rows {n}, "
                f"but got start_index: {start}."
            )
        return _limit(RangeOrder(min(start, n), n), self.num_samples)

    def _count(self, total_rows: int) -> int:
        return _capped(max(0, total_rows - int(self.start_index or 0)), self.num_samples)


# -------------------------------------------------------------------------- random


class RandomSampler(Sampler):
    """Rows in random order (a keyed permutation), or drawn with ``replacement``."""

    def __init__(self, replacement: bool = False, num_samples: int | None = None) -> None:
        if not isinstance(replacement, bool):
            raise WrongTypeError(
                f"replacement should be a boolean value, but got replacement: {replacement!r}."
            )
        super().__init__(num_samples)
        self.replacement = replacement

    def _order(self, counts: IdArray, seed: int, epoch: int, labels: LabelsFn | None) -> Order:
        n = int(counts.sum())
        if not self.replacement:
            return _limit(PermutationOrder(n, derive_key(seed, epoch, "random")), self.num_samples)
        size = self._count(n)
        if n == 0:
            return ArrayOrder(np.zeros(0, dtype=np.int64))
        return ArrayOrder(_rng(seed, epoch, "random-replacement").integers(0, n, size))

    def _count(self, total_rows: int) -> int:
        if self.replacement:
            return (self.num_samples or total_rows) if total_rows else 0
        return _capped(total_rows, self.num_samples)


# -------------------------------------------------------------------------- subsets


def _check_indices(indices: object, owner: str) -> IdArray:
    if is_int(indices):
        indices = [indices]
    if not isinstance(indices, Iterable) or isinstance(indices, (str, bytes)):
        raise WrongTypeError(f"{owner}: indices must be a list of ints, got {indices!r}")
    values = list(indices)
    for i, item in enumerate(values):
        if not is_int(item):
            raise WrongTypeError(
                f"{owner}: Type of indices element must be int, but got list[{i}]: "
                f"{item!r}, type: {type(item)}."
            )
        if item < 0:
            raise ArgumentError(f"{owner}: indices must be >= 0, but got list[{i}]: {item!r}.")
    return np.array(values, dtype=np.int64).reshape(-1)


class SubsetSampler(Sampler):
    """The rows at ``indices``, in the given order (repeats allowed)."""

    def __init__(self, indices: Iterable[int], num_samples: int | None = None) -> None:
        super().__init__(num_samples)
        self.indices = _check_indices(indices, type(self).__name__)

    def _checked(self, n: int) -> ArrayOrder:
        if self.indices.size and int(self.indices.max()) >= n:
            j = int(np.argmax(self.indices >= n))
            raise SamplerError(
                f"{type(self).__name__}: indices[{j}] = {int(self.indices[j])} is out of range "
                f"for a dataset of {n} rows; use indices in [0, {n - 1}]."
            )
        return ArrayOrder(self.indices)

    def _order(self, counts: IdArray, seed: int, epoch: int, labels: LabelsFn | None) -> Order:
        return _limit(self._checked(int(counts.sum())), self.num_samples)

    def _count(self, total_rows: int) -> int:
        return _capped(len(self.indices), self.num_samples)

    def get_num_samples(self) -> int | None:
        """``num_samples``, or the number of indices when it is not set (MindSpore's value);
        combined with a child's by the rule of :meth:`Sampler.get_num_samples`."""
        own = len(self.indices) if self.num_samples is None else self.num_samples
        child = self.child_sampler.get_num_samples() if self.child_sampler is not None else None
        return own if child is None else min(own, child)


class SubsetRandomSampler(SubsetSampler):
    """The rows at ``indices``, in a random order each epoch."""

    def _order(self, counts: IdArray, seed: int, epoch: int, labels: LabelsFn | None) -> Order:
        subset = self._checked(int(counts.sum()))
        perm = PermutationOrder(len(subset), derive_key(seed, epoch, "subset-random"))
        return _limit(ComposedOrder(perm, subset), self.num_samples)


class WeightedRandomSampler(Sampler):
    """Rows ``0 .. len(weights) - 1`` drawn with probability proportional to ``weights``."""

    def __init__(
        self,
        weights: Sequence[float] | npt.NDArray[Any],
        num_samples: int | None = None,
        replacement: bool = True,
    ) -> None:
        values = list(weights) if isinstance(weights, (list, tuple, np.ndarray)) else [weights]
        for i, w in enumerate(values):
            if isinstance(w, bool) or not isinstance(w, (Number, np.number)):
                raise WrongTypeError(
                    f"type of weights element must be number, but got w[{i}]: {w!r}, "
                    f"type: {type(w)}."
                )
        arr = np.array(values, dtype=np.float64).reshape(-1)
        if arr.size == 0:
            raise ArgumentError("weights size should not be 0")
        if not np.isfinite(arr).all():
            raise ArgumentError(f"weights must be finite numbers, got {arr.tolist()!r}")
        if (arr < 0).any():
            raise ArgumentError("weights should not contain negative numbers.")
        if not (arr > 0).any():
            raise ArgumentError("elements of weights should not be all zeros.")
        if not isinstance(replacement, bool):
            raise WrongTypeError(
                f"replacement should be a boolean value, but got replacement: {replacement!r}."
            )
        super().__init__(_check_num_samples(num_samples, positive=True))
        self.weights = arr
        self.replacement = replacement
        if not replacement and self._count(0) > int((arr > 0).sum()):
            raise ArgumentError(
                f"num_samples={self._count(0)} is more than the {int((arr > 0).sum())} rows "
                "with a positive weight; without replacement each row can be drawn once."
            )

    def _order(self, counts: IdArray, seed: int, epoch: int, labels: LabelsFn | None) -> Order:
        n = int(counts.sum())
        if len(self.weights) > n:
            raise SamplerError(
                f"WeightedRandomSampler has {len(self.weights)} weights but the dataset has "
                f"{n} rows; give one weight per row (or fewer)."
            )
        p = self.weights / self.weights.sum()
        rng = _rng(seed, epoch, "weighted")
        ids = rng.choice(len(p), size=self._count(n), replace=self.replacement, p=p)
        return ArrayOrder(ids)

    def _count(self, total_rows: int) -> int:
        return self.num_samples or len(self.weights)


# ------------------------------------------------------------------------------ PK


class PKSampler(Sampler):
    """``num_val`` rows of every class of ``class_column`` (P classes x K rows).

    Classes come in sorted order (shuffled if ``shuffle``); a class's rows are its
    first ``num_val`` rows in row order (a random distinct subset if ``shuffle``).
    A class with fewer than ``num_val`` rows repeats its rows cyclically. MindSpore
    returned one row repeated ``num_val`` times; mrecord returns distinct rows.
    """

    def __init__(
        self,
        num_val: int,
        num_class: int | None = None,
        shuffle: bool = False,
        class_column: str = "label",
        num_samples: int | None = None,
    ) -> None:
        if not is_int(num_val):
            raise int_type_error("num_val", num_val)
        if num_val <= 0:
            raise ArgumentError(
                f"num_val should be a positive integer value, but got num_val: {num_val}."
            )
        if num_class is not None:
            raise UnsupportedArgumentError("Not supported to specify num_class for PKSampler.")
        if not isinstance(shuffle, bool):
            raise WrongTypeError(
                f"shuffle should be a boolean value, but got shuffle: {shuffle!r}."
            )
        if not isinstance(class_column, str):
            raise int_type_error("class_column", class_column, "<class 'str'>")
        super().__init__(num_samples)
        self.num_val = int(num_val)
        self.num_class = num_class
        self.shuffle = shuffle
        self.class_column = class_column

    def _labels(self, labels: LabelsFn | None, n: int) -> npt.NDArray[Any]:
        if labels is None:
            raise SamplerError(
                f"PKSampler needs the values of class_column {self.class_column!r} for every "
                "row, but the dataset did not provide them (pass labels=)."
            )
        values = np.asarray(labels())
        if values.shape[:1] != (n,) or values.size != n:
            raise SamplerError(
                f"PKSampler: class_column {self.class_column!r} must hold one scalar per row "
                f"({n} rows), got an array of shape {values.shape}."
            )
        return values.reshape(n)

    def _order(self, counts: IdArray, seed: int, epoch: int, labels: LabelsFn | None) -> Order:
        n = int(counts.sum())
        values = self._labels(labels, n)
        if n == 0:
            return ArrayOrder(np.zeros(0, dtype=np.int64))
        _, inverse = np.unique(values, return_inverse=True)
        inverse = inverse.reshape(-1)
        sizes = np.bincount(inverse)
        num_classes = len(sizes)
        if self.shuffle:
            rng = _rng(seed, epoch, "pk")
            by_class = np.lexsort((rng.random(n), inverse))
            class_order = rng.permutation(num_classes)
        else:
            by_class = np.argsort(inverse, kind="stable")
            class_order = np.arange(num_classes)
        starts = np.cumsum(sizes) - sizes
        cls = np.repeat(class_order, self.num_val)
        k = np.tile(np.arange(self.num_val), num_classes)
        ids = by_class[starts[cls] + k % sizes[cls]]
        return _limit(ArrayOrder(ids), self.num_samples)

    def _count(self, total_rows: int) -> int:
        raise SamplerError(
            "PKSampler's row count depends on the classes in the data; "
            "call num_rows_for(total_rows, labels=...)."
        )

    def num_rows_for(self, total_rows: int, *, labels: LabelsFn | None = None) -> int:
        """``num_val`` x number of classes (capped by ``num_samples``); needs ``labels``."""
        if labels is None:
            return self._count(total_rows)
        order = self.build_order([total_rows], seed=0, epoch=0, labels=labels)
        return len(order)


# ------------------------------------------------------- shuffle modes and shards


class _ModeSampler(Sampler):
    """A shuffle mode, then padding, then one shard, then ``num_samples`` (per shard)."""

    def __init__(
        self,
        *,
        mode: Shuffle | None,
        num_shards: int,
        shard_id: int,
        num_samples: int | None,
        offset: int = -1,
        num_padded: int = 0,
        partial_window: int = DEFAULT_PARTIAL_WINDOW,
        adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
    ) -> None:
        super().__init__(num_samples)
        self.mode = mode
        self.num_shards, self.shard_id = check_shards(num_shards, shard_id)
        self.offset = offset
        if not is_int(num_padded):
            raise int_type_error("num_padded", num_padded)
        if num_padded < 0:
            raise ArgumentError(f"num_padded is invalid, num_padded={num_padded}.")
        self.num_padded = int(num_padded)
        self.partial_window = check_option("partial_window", partial_window)
        self.adaptive_threshold = check_option("adaptive_threshold", adaptive_threshold)

    def _order(self, counts: IdArray, seed: int, epoch: int, labels: LabelsFn | None) -> Order:
        return self._layout_order(counts, seed, epoch, labels, None)

    def _layout_order(
        self,
        counts: IdArray,
        seed: int,
        epoch: int,
        labels: LabelsFn | None,
        layout: BlockLayout | None,
    ) -> Order:
        n = int(counts.sum())
        if layout is not None and layout.adaptive and self.num_shards > 1:
            # Measured numbers differ from host to host; ranks must agree on the order.
            layout = layout.without_adaptive()
        base = shuffle_order(
            self.mode,
            counts,
            seed,
            epoch,
            partial_window=self.partial_window,
            adaptive_threshold=self.adaptive_threshold,
            layout=layout,
        )
        if isinstance(base, BlockOrder) and self.num_shards > 1 and self.offset == -1:
            # One contiguous run of windows per shard, not a share of every window.
            base = PartitionedOrder(base, self.num_shards)
        shard = split_order(
            base,
            n,
            self.num_shards,
            self.shard_id,
            num_padded=self.num_padded,
            offset=self.offset,
        )
        return _limit(shard, self.num_samples)

    def _count(self, total_rows: int) -> int:
        if self.num_padded:
            check_padding(total_rows, self.num_padded, self.num_shards)
        rows = shard_size(total_rows + self.num_padded, self.num_shards, self.shard_id, self.offset)
        return _capped(rows, self.num_samples)

    def _check_child(self, child: Sampler) -> None:
        super()._check_child(child)
        if self.mode not in (None, Shuffle.GLOBAL):
            raise SamplerError(
                "A sampler with a child sampler must shuffle with Shuffle.GLOBAL (or not "
                f"at all), got shuffle {self.mode!r}."
            )


class DistributedSampler(_ModeSampler):
    """Shard ``shard_id`` of ``num_shards`` of the rows, after a shuffle mode.

    The order of the whole dataset (``shuffle``: True = GLOBAL, False = none, or a
    :class:`Shuffle`) is the same on every rank; it is split strided with wraparound
    (``offset=-1``), or into contiguous blocks from ``offset`` (ConcatDataset).
    ``num_samples`` caps each shard.
    """

    def __init__(
        self,
        num_shards: int,
        shard_id: int,
        shuffle: bool | Shuffle = True,
        num_samples: int | None = None,
        offset: int = -1,
    ) -> None:
        if not is_int(num_shards):
            raise int_type_error("num_shards", num_shards)
        if not is_int(shard_id):
            raise int_type_error("shard_id", shard_id)
        if not isinstance(shuffle, (bool, Shuffle)):
            raise WrongTypeError(
                f"shuffle should be a boolean value or Shuffle enum, but got shuffle: {shuffle!r}."
            )
        if not is_int(offset):
            raise int_type_error("offset", offset)
        if num_shards > 0 and not -1 <= offset <= num_shards:
            raise SamplerError(
                f"offset should be no more than num_shards={num_shards} (or -1 for no "
                f"offset), but got offset: {offset}."
            )
        super().__init__(
            mode=parse_shuffle(shuffle),
            num_shards=num_shards,
            shard_id=shard_id,
            num_samples=num_samples,
            offset=int(offset),
        )
        self.shuffle = shuffle

    def __repr__(self) -> str:
        return (
            f"DistributedSampler(num_shards={self.num_shards}, shard_id={self.shard_id}, "
            f"shuffle={self.shuffle!r}, num_samples={self.num_samples!r}, offset={self.offset})"
        )


class DatasetSampler(_ModeSampler):
    """The sampler a dataset builds from its own ``shuffle``/sharding/padding arguments.

    Made by :func:`sampler_from_args`; ``mode`` is already resolved (None: no shuffle).
    """

    def __init__(
        self,
        mode: Shuffle | None,
        num_shards: int = 1,
        shard_id: int = 0,
        num_samples: int | None = None,
        num_padded: int = 0,
        partial_window: int = DEFAULT_PARTIAL_WINDOW,
        adaptive_threshold: int = DEFAULT_ADAPTIVE_THRESHOLD,
    ) -> None:
        super().__init__(
            mode=mode,
            num_shards=num_shards,
            shard_id=shard_id,
            num_samples=num_samples,
            num_padded=num_padded,
            partial_window=partial_window,
            adaptive_threshold=adaptive_threshold,
        )

    def __repr__(self) -> str:
        return (
            f"DatasetSampler(mode={self.mode!r}, num_shards={self.num_shards}, "
            f"shard_id={self.shard_id}, num_samples={self.num_samples!r}, "
            f"num_padded={self.num_padded})"
        )


def chain_sampler(new_sampler: Sampler, current: Sampler | None) -> Sampler:
    """``Dataset.add_sampler``: ``new_sampler`` with ``current`` as its child (so it samples
    the ids ``current`` gives); ``current`` None (sequential) gives ``new_sampler`` alone."""
    if not isinstance(new_sampler, Sampler):
        raise WrongTypeError(
            f"add_sampler needs a mrecord sampler, got {new_sampler!r} "
            f"({type(new_sampler).__name__})"
        )
    if current is not None:
        new_sampler.add_child(current)
    return new_sampler
