"""The :class:`Dataset` base class: every op method and iterator creation.

A dataset is a node of a tree: sources at the leaves, ops above them. Ops return
a new node (``ds.map(...)`` does not change ``ds``). Each node knows its column
names and (usually) its row count without reading data, and runs as a generator
of :class:`~mrecord.block.Block` s per epoch (``_execute``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mrecord.block import Block
from mrecord.errors import PipelineError, WrongTypeError
from mrecord.pipeline.engine.context import close_iterator
from mrecord.pipeline.engine.effects import READS_EVERYTHING, ColumnEffects

# The op classes (MapDataset, BatchDataset, ...) and the iterators are imported inside the
# methods that build them, not here: every op module subclasses Dataset, so importing them
# at the top would be an import cycle. Type checkers see them through this block (grain's
# dataset.py does the same).
if TYPE_CHECKING:
    from mrecord.pipeline.engine.context import ExecContext
    from mrecord.pipeline.engine.graph import Plan
    from mrecord.pipeline.engine.iterator import DictIterator, TupleIterator
    from mrecord.pipeline.ops.batch import BatchDataset, BatchInfo
    from mrecord.pipeline.ops.concat import ConcatDataset
    from mrecord.pipeline.ops.filter import FilterDataset
    from mrecord.pipeline.ops.map import MapDataset
    from mrecord.pipeline.ops.project import ProjectDataset
    from mrecord.pipeline.ops.rename import RenameDataset
    from mrecord.pipeline.ops.repeat import RepeatDataset
    from mrecord.pipeline.ops.shuffle import ShuffleDataset
    from mrecord.pipeline.ops.skip import SkipDataset
    from mrecord.pipeline.ops.take import TakeDataset
    from mrecord.pipeline.ops.zip import ZipDataset

__all__ = ["Dataset"]


class Dataset:
    """A node of the data pipeline; the base of sources and ops (MindSpore's ``Dataset``)."""

    def __init__(self, children: Sequence[Dataset] = ()) -> None:
        self.children: tuple[Dataset, ...] = tuple(children)
        self._consumers: list[weakref.ReferenceType[Dataset]] = []
        for child in self.children:
            if not isinstance(child, Dataset):
                raise WrongTypeError(f"expected a Dataset, got {child!r} ({type(child).__name__})")
            child._consumers.append(weakref.ref(self))
        # A state given to set_state, for the next iterator to take (and clear). Positions
        # themselves live in a run's context, never here (issue 25 §2).
        self._next_state: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Weak references do not pickle; __setstate__ of each parent re-links its children.
        state = self.__dict__.copy()
        state["_consumers"] = []
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for child in self.children:
            child._consumers.append(weakref.ref(self))

    # ------------------------------------------------------------------ node contract
    def _column_names(self) -> list[str]:
        """Column names this node produces (no data read)."""
        raise NotImplementedError

    def _num_rows(self) -> int | None:
        """Rows per epoch without reading data; None when only a pass can tell."""
        raise NotImplementedError

    def _execute(self, ctx: ExecContext, epoch: int) -> Iterator[Block]:
        """Yield this node's blocks for ``epoch`` (0, 1, 2, ...)."""
        raise NotImplementedError

    def _column_effects(self) -> ColumnEffects:
        """How this node changes columns (reads, renames, drops, batch levels, joins).

        The default says "may read every column": planning (offload) then refuses to
        move work past this node. Override it to declare what the node really does.
        """
        return READS_EVERYTHING

    def _describe(self) -> str:
        """One line naming the node and its arguments (used in errors and plans)."""
        return f"{type(self).__name__}()"

    def _validate(self) -> None:
        """Check the node against its children's columns (called when a pipeline is built)."""

    def __repr__(self) -> str:
        return self._describe()

    # ------------------------------------------------------------------ optional hooks
    # Declared here with their defaults; the nodes that can do more override them.
    def _add_sampler(self, new_sampler: Any) -> None:
        """Make ``new_sampler`` sample the ids this node's sampler gives (``add_sampler``).

        Only sources that sample by index can; the default refuses.
        """
        raise PipelineError(
            f"{self!r} has no sampler to add to: add_sampler works on a source that "
            "samples by index (MindDataset, a GeneratorDataset with __getitem__/__len__)"
        )

    def _source_num_classes(self) -> int | None:
        """The number of classes this node knows of (``num_classes``); None: it knows
        none, and :meth:`num_classes` asks the node below."""
        return None

    def _iter_blocks_range(
        self, ctx: ExecContext, epoch: int, start: int, stop: int
    ) -> Iterator[Block]:
        """Rows ``start:stop`` of this node's ``epoch`` (``ConcatDataset.use_sampler``).

        The default runs the epoch and slices it, stopping once ``stop`` is reached; a
        source that can read a slice of its order directly overrides it.
        """
        position = 0
        blocks = self._execute(ctx, epoch)
        try:
            for block in blocks:
                end = position + len(block)
                lo, hi = max(start, position), min(stop, end)
                if hi > lo:
                    yield block.slice(lo - position, hi - position)
                position = end
                if position >= stop:
                    break
        finally:
            close_iterator(blocks)

    # ------------------------------------------------------------------ resume (node state)
    def _child_positions(self, epoch: int, rows: int) -> list[tuple[int, int]]:
        """Where each child must start so that this node starts after ``rows`` output rows
        of ``epoch``: one ``(child epoch, child rows)`` per child. Nodes that can resume
        mid-epoch override it; the others cannot say, and refuse."""
        raise PipelineError(
            f"{self!r} cannot resume mid-epoch: only chains of MindDataset (or another "
            "random-access source) -> map / batch / repeat / project / rename can; resume at "
            "an epoch boundary (rows=0) instead"
        )

    def get_state(self, epoch: int, rows: int) -> dict[str, Any]:
        """This node's state once ``rows`` output rows (batches after ``batch``) of
        ``epoch`` were delivered: a JSON-serialisable tree over the node and its children."""
        # At an epoch boundary nothing is skipped, so every node can "resume" there.
        children = self._child_positions(epoch, rows) if rows else []
        return {
            "node": type(self).__name__,
            "epoch": epoch,
            "rows": rows,
            "children": [
                child.get_state(e, r)
                for child, (e, r) in zip(self.children, children, strict=False)
            ],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Make the next iterator created over this dataset (``create_dict_iterator``,
        ``create_tuple_iterator``, or those of a pipeline built on it) start its epoch
        ``state['epoch']`` after ``state['rows']`` output rows.

        ``state`` comes from :meth:`get_state` on the same pipeline; PipelineError when
        it was taken from another pipeline shape. The iterator takes the positions into
        its own run when it is created; iterators made before are not affected, and
        the dataset keeps nothing (an iterator's ``load_state_dict`` does the same
        without going through the dataset).
        """
        self.resume_positions(state)  # refuse a state of another shape now
        self._next_state = state

    def resume_positions(self, state: dict[str, Any]) -> dict[int, tuple[int, int]]:
        """Where each node under this one starts for ``state`` (from :meth:`get_state`):
        ``{id(node): (epoch, rows)}`` for the nodes that skip rows; the iterator hands
        them to its run's context. PipelineError when ``state`` is of another shape."""
        positions: dict[int, tuple[int, int]] = {}
        self._collect_positions(state, positions)
        return positions

    def _collect_positions(
        self, state: dict[str, Any], positions: dict[int, tuple[int, int]]
    ) -> None:
        if not isinstance(state, dict) or state.get("node") != type(self).__name__:
            got = state.get("node") if isinstance(state, dict) else state
            raise PipelineError(
                f"the saved state is for a {got!r} node, this pipeline has {self!r} there; "
                "load a state saved from the same pipeline"
            )
        epoch, rows = int(state["epoch"]), int(state["rows"])
        children = state.get("children", [])
        if rows and len(children) != len(self.children):
            raise PipelineError(f"the saved state of {self!r} has {len(children)} children")
        if rows:
            positions[id(self)] = (epoch, rows)
        for i, child in enumerate(self.children):
            at_start = {"node": type(child).__name__, "epoch": epoch, "rows": 0, "children": []}
            child._collect_positions(children[i] if i < len(children) else at_start, positions)

    def _pending_positions(self, clear: bool = False) -> dict[int, tuple[int, int]]:
        """The positions :meth:`set_state` left on this node and those below, for the
        iterator being created; ``clear=True`` once it holds them (they are its run's)."""
        positions: dict[int, tuple[int, int]] = {}
        for child in self.children:
            positions.update(child._pending_positions(clear))
        state = self._next_state
        if clear:
            self._next_state = None
        if state is not None:
            positions.update(self.resume_positions(state))  # a state set higher up wins
        return positions

    # ------------------------------------------------------------------ ops
    def map(
        self,
        operations: Any,
        input_columns: str | Sequence[str] | None = None,
        output_columns: str | Sequence[str] | None = None,
        num_parallel_workers: int | None = None,
        python_multiprocessing: bool = False,
        offload: bool | None = None,
    ) -> MapDataset:
        """Apply ``operations`` (one op or a list, in order) to ``input_columns`` row by row."""
        from mrecord.pipeline.ops.map import MapDataset

        return MapDataset(
            self,
            operations,
            input_columns=input_columns,
            output_columns=output_columns,
            num_parallel_workers=num_parallel_workers,
            python_multiprocessing=python_multiprocessing,
            offload=offload,
        )

    def batch(
        self,
        batch_size: int | Callable[[BatchInfo], int],
        drop_remainder: bool = False,
        num_parallel_workers: int | None = None,
        per_batch_map: Callable[..., Any] | None = None,
        input_columns: str | Sequence[str] | None = None,
        output_columns: str | Sequence[str] | None = None,
    ) -> BatchDataset:
        """Group ``batch_size`` consecutive rows into one (each column stacked).

        ``batch_size`` may be a callable ``f(batch_info) -> int`` giving each batch's size.
        """
        from mrecord.pipeline.ops.batch import BatchDataset

        return BatchDataset(
            self,
            batch_size,
            drop_remainder=drop_remainder,
            num_parallel_workers=num_parallel_workers,
            per_batch_map=per_batch_map,
            input_columns=input_columns,
            output_columns=output_columns,
        )

    def shuffle(self, buffer_size: int) -> ShuffleDataset:
        """Shuffle rows through a buffer of ``buffer_size`` rows (reshuffled every epoch)."""
        from mrecord.pipeline.ops.shuffle import ShuffleDataset

        return ShuffleDataset(self, buffer_size)

    def repeat(self, count: int | None = None) -> RepeatDataset:
        """Repeat the data ``count`` times (None or -1: forever)."""
        from mrecord.pipeline.ops.repeat import RepeatDataset

        return RepeatDataset(self, count)

    def project(self, columns: str | Sequence[str]) -> ProjectDataset:
        """Keep only ``columns``, in that order."""
        from mrecord.pipeline.ops.project import ProjectDataset

        return ProjectDataset(self, columns)

    def rename(
        self, input_columns: str | Sequence[str], output_columns: str | Sequence[str]
    ) -> RenameDataset:
        """Rename ``input_columns`` to ``output_columns`` (same length)."""
        from mrecord.pipeline.ops.rename import RenameDataset

        return RenameDataset(self, input_columns, output_columns)

    def concat(self, datasets: Dataset | Sequence[Dataset]) -> ConcatDataset:
        """Rows of this dataset, then those of ``datasets`` (same columns)."""
        from mrecord.pipeline.ops.concat import ConcatDataset

        others = [datasets] if isinstance(datasets, Dataset) else list(datasets)
        return ConcatDataset([self, *others])

    def __add__(self, other: Dataset) -> ConcatDataset:
        return self.concat(other)

    def zip(self, datasets: Dataset | Sequence[Dataset]) -> ZipDataset:
        """Rows side by side with those of ``datasets`` (column names must differ)."""
        from mrecord.pipeline.ops.zip import ZipDataset

        others = [datasets] if isinstance(datasets, Dataset) else list(datasets)
        return ZipDataset([self, *others])

    def take(self, count: int = -1) -> TakeDataset:
        """The first ``count`` rows of each epoch (-1: all)."""
        from mrecord.pipeline.ops.take import TakeDataset

        return TakeDataset(self, count)

    def skip(self, count: int) -> SkipDataset:
        """Drop the first ``count`` rows of each epoch."""
        from mrecord.pipeline.ops.skip import SkipDataset

        return SkipDataset(self, count)

    def filter(
        self,
        predicate: Callable[..., Any],
        input_columns: str | Sequence[str] | None = None,
        num_parallel_workers: int | None = None,
    ) -> FilterDataset:
        """Keep the rows for which ``predicate(*input_columns)`` is true.

        Its size is not known in advance: ``get_dataset_size`` then runs a pass.
        """
        from mrecord.pipeline.ops.filter import FilterDataset

        return FilterDataset(self, predicate, input_columns, num_parallel_workers)

    # ------------------------------------------------------------------ issue 17's ops
    def split(self, sizes: Sequence[int | float], randomize: bool = True) -> list[Dataset]:
        """Non-overlapping parts: ``sizes`` as row counts (summing to the dataset size) or
        fractions (summing to 1; rounded as MindSpore does). ``randomize`` assigns rows to
        parts at random (seeded by ``config.get_seed()``); each part keeps this dataset's
        row order. Each part reads this dataset in a nested pipeline of its own."""
        from mrecord.pipeline.ops.split import split

        return split(self, sizes, randomize)

    def apply(self, apply_func: Callable[[Dataset], Dataset]) -> Dataset:
        """``apply_func(self)``, which must return a dataset (a reusable chain of ops)."""
        result = apply_func(self)
        if not isinstance(result, Dataset):
            raise WrongTypeError(
                f"apply_func must return a Dataset, got {type(result).__name__} from "
                f"{apply_func!r}"
            )
        return result

    def flat_map(self, func: Callable[..., Dataset]) -> Dataset:
        """Each row's values to ``func(*values)``, which returns a dataset; its rows
        replace the row (all such datasets must have the same columns)."""
        from mrecord.pipeline.ops.flat_map import FlatMapDataset

        return FlatMapDataset(self, func)

    def bucket_batch_by_length(
        self,
        column_names: str | Sequence[str],
        bucket_boundaries: Sequence[int],
        bucket_batch_sizes: Sequence[int],
        element_length_function: Callable[..., int] | None = None,
        pad_info: dict[str, tuple[Sequence[int | None] | None, Any]] | None = None,
        pad_to_bucket_boundary: bool = False,
        drop_remainder: bool = False,
    ) -> Dataset:
        """Batch rows of similar length together (MindSpore's rules; see
        :class:`mrecord.pipeline.ops.bucket.BucketBatchDataset`)."""
        from mrecord.pipeline.ops.bucket import BucketBatchDataset

        return BucketBatchDataset(
            self,
            column_names,
            bucket_boundaries,
            bucket_batch_sizes,
            element_length_function=element_length_function,
            pad_info=pad_info,
            pad_to_bucket_boundary=pad_to_bucket_boundary,
            drop_remainder=drop_remainder,
        )

    def add_sampler(self, new_sampler: Any) -> None:
        """Sample the ids this source's sampler gives with ``new_sampler`` (MindSpore's
        ``add_sampler``: the current sampler becomes ``new_sampler``'s child). Sources
        that sample by index (MindDataset, a random-access GeneratorDataset) support it."""
        self._add_sampler(new_sampler)

    def num_classes(self) -> int | None:
        """Number of classes the source knows of (as MindSpore: None when it knows none)."""
        node: Dataset | None = self
        while node is not None:
            known = node._source_num_classes()
            if known is not None:
                return known
            node = node.children[0] if node.children else None
        return None

    def padded_batch(
        self,
        batch_size: int,
        drop_remainder: bool = False,
        num_parallel_workers: int | None = None,
        pad_info: dict[str, tuple[Sequence[int | None] | None, Any]] | None = None,
    ) -> BatchDataset:
        """``batch``, padding each row's arrays to one shape per column first (MindSpore 2.x).

        ``pad_info``: ``{column: (shape, value)}``; a None shape (or None entry) pads to
        the batch's largest; columns not named are padded to the largest with 0;
        ``{}`` pads every column; None pads nothing (a plain batch).
        """
        from mrecord.pipeline.ops.padded_batch import PaddedBatchDataset

        return PaddedBatchDataset(
            self,
            batch_size,
            drop_remainder=drop_remainder,
            num_parallel_workers=num_parallel_workers,
            pad_info=pad_info,
        )

    def use_sampler(self, new_sampler: Any) -> None:
        """Read this dataset's source through ``new_sampler`` instead of its own order.

        MindSpore's rule: the sampler replaces the source's shuffle/sharding/num_samples
        (keeping the old sampler's child). On an op, it applies to the source below.
        """
        from mrecord.sampling import Sampler

        if new_sampler is None:
            raise WrongTypeError("Input sampler can not be None.")
        if not isinstance(new_sampler, Sampler):
            raise WrongTypeError(
                f"Input sampler is not an instance of a sampler, got {new_sampler!r}"
            )
        self._use_sampler(new_sampler)

    def _use_sampler(self, sampler: Any) -> None:
        """Replace the sampler (sources); ops pass it to their only child."""
        if len(self.children) != 1:
            from mrecord.errors import PipelineError

            raise PipelineError(
                f"{self!r} has {len(self.children)} inputs; call use_sampler on the source "
                "that should be sampled"
            )
        self.children[0]._use_sampler(sampler)

    # ------------------------------------------------------------------ saving
    def save(self, file_name: str, num_files: int = 1, file_type: str = "mindrecord") -> None:
        """Write one epoch of this pipeline as the dataset ``file_name`` (MindSpore's ``save``).

        ``num_files`` shards (1..1000: ``file_name`` alone, or ``file_name0``...), each with
        its ``.db``, committed atomically by :class:`mrecord.FileWriter`; an existing
        dataset is refused (``DatasetExistsError``, a ``RuntimeError``). Column types are
        converted as MindSpore does (bool and small ints → int32, float16 → float32, a
        uint8 array → bytes; see :mod:`mrecord.pipeline.ops.save`). As with MindSpore, save
        before ``batch``/``repeat`` and with ``shuffle=False`` to keep the row order.
        """
        from mrecord.pipeline.ops.save import save_dataset

        save_dataset(self, file_name, num_files, file_type)

    # ------------------------------------------------------------------ iterators
    def create_dict_iterator(
        self, num_epochs: int = -1, output_numpy: bool = False
    ) -> DictIterator:
        """An iterator of ``{column: value}`` rows; one ``for`` loop per epoch.

        Values are :class:`mrecord.Tensor` (numpy arrays with MindSpore's ``asnumpy()``);
        ``output_numpy=True`` gives plain numpy arrays.
        """
        from mrecord.pipeline.engine.iterator import DictIterator

        return DictIterator(self, num_epochs=num_epochs, output_numpy=output_numpy)

    def create_tuple_iterator(
        self,
        columns: Sequence[str] | None = None,
        num_epochs: int = -1,
        output_numpy: bool = False,
    ) -> TupleIterator:
        """An iterator of rows as lists of values (``columns`` picks and orders them).

        Values as in :meth:`create_dict_iterator`.
        """
        from mrecord.pipeline.engine.iterator import TupleIterator

        return TupleIterator(
            self, columns=columns, num_epochs=num_epochs, output_numpy=output_numpy
        )

    def __iter__(self) -> Iterator[list[Any]]:
        return iter(self.create_tuple_iterator(num_epochs=1))

    # ------------------------------------------------------------------ metadata
    def get_col_names(self) -> list[str]:
        """Column names of the rows this dataset yields."""
        from mrecord.pipeline.engine.graph import build_graph

        build_graph(self)
        return self._column_names()

    def get_dataset_size(self) -> int:
        """Rows (or batches) per epoch.

        Computed from sizes without reading data (batch/repeat/skip/take
        arithmetic); a ``filter`` (or a source of unknown length) needs one pass.
        Below an endless ``repeat()`` the size is that of one pass of the repeated
        data, as MindSpore reports it (``ds.repeat().batch(2)`` of 5 rows: 3).
        """
        from mrecord.pipeline.engine.graph import build_graph
        from mrecord.pipeline.engine.iterator import count_rows
        from mrecord.pipeline.ops.repeat import one_pass_sizes

        build_graph(self)
        size = self._num_rows()
        if size == -1:
            with one_pass_sizes():
                one_pass = self._num_rows()
            return one_pass if one_pass is not None else -1  # a pass would never end
        return size if size is not None else count_rows(self)

    def get_batch_size(self) -> int:
        """The batch size of the nearest ``batch`` below this node (1 without one)."""
        from mrecord.pipeline.ops.batch import BatchDataset

        node: Dataset | None = self
        while node is not None:
            if isinstance(node, BatchDataset):
                return node.batch_size
            node = node.children[0] if node.children else None
        return 1

    def get_repeat_count(self) -> int:
        """The count of the nearest ``repeat`` below this node (1 without one, -1 forever)."""
        from mrecord.pipeline.ops.repeat import RepeatDataset

        node: Dataset | None = self
        while node is not None:
            if isinstance(node, RepeatDataset):
                return node.count
            node = node.children[0] if node.children else None
        return 1

    def _first_row(self) -> list[Any]:
        from mrecord.pipeline.engine.iterator import first_row

        return first_row(self)

    def output_shapes(self) -> list[list[int]]:
        """Shape of each column of the first row (reads one row, as MindSpore does)."""
        return [list(np.shape(v)) for v in self._first_row()]

    def output_types(self) -> list[np.dtype[Any]]:
        """numpy dtype of each column of the first row (reads one row)."""
        return [np.asarray(v).dtype for v in self._first_row()]

    def plan(self) -> Plan:
        """The pipeline plan: the node tree, and the ops moved to the offload step.

        ``print(ds.plan())`` shows it; offloaded ops are marked on their map.
        """
        from mrecord.pipeline.engine.graph import build_graph

        return build_graph(self).plan()
