"""The block layout a ``MindDataset`` reads with: page boundaries, sizes, ADAPTIVE's choice.

``Shuffle.BLOCK`` and ``Shuffle.ADAPTIVE`` take a
:class:`~mrecord.sampling.shuffle.block.BlockLayout`; :func:`plan_layout` builds it from
the reader's pages (``mrecord.reader.layout``), this process's memory budget and, when
needed, the measured storage under the files, by the rules of
:func:`~mrecord.sampling.shuffle.block.choose_layout` (several ranks: nothing measured).

Sizes measured in one process may differ in the next (a restarted job): for a resume
that must be exact across restarts, pass ``block_rows`` and ``window_blocks``
(``ds.block_layout`` shows the sizes chosen). :func:`plan_layout_from` plans from facts
gathered elsewhere: ``RemoteDataset`` gets them from its server, and this process's
``memory_budget`` from here (it holds its sweep windows, ``serve/client/sweep.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from mrecord.reader.dataset_reader import DatasetReader
from mrecord.reader.layout import DatasetLayout, dataset_layout, measured_numbers, memory_budget
from mrecord.sampling import Sampler, Shuffle
from mrecord.sampling.shuffle._common import check_option
from mrecord.sampling.shuffle.block import BlockLayout, Measure, choose_layout

__all__ = [
    "DatasetLayout",
    "check_block_sizes",
    "memory_budget",
    "mode_and_shards",
    "plan_layout",
    "plan_layout_from",
]


def check_block_sizes(block_rows: int | None, window_blocks: int | None) -> None:
    """Validate ``block_rows`` / ``window_blocks`` arguments (None: chosen by measurement)."""
    if block_rows is not None:
        check_option("block_rows", block_rows)
    if window_blocks is not None:
        check_option("window_blocks", window_blocks)


def mode_and_shards(sampler: Sampler) -> tuple[Shuffle | None, int]:
    """The shuffle mode that orders the rows (the innermost sampler's) and its shards."""
    node: Sampler | None = sampler
    mode: Shuffle | None = None
    shards = 1
    while node is not None:
        mode = getattr(node, "mode", None)
        shards = int(getattr(node, "num_shards", 1))
        node = node.get_child()
    return mode, shards


def plan_layout(
    reader: DatasetReader,
    sampler: Sampler,
    block_rows: int | None = None,
    window_blocks: int | None = None,
) -> BlockLayout | None:
    """The layout ``sampler`` should read ``reader`` with (None: its mode needs none)."""
    return plan_layout_from(
        sampler,
        lambda: dataset_layout(reader),
        memory_budget,
        lambda: measured_numbers(reader),
        block_rows,
        window_blocks,
    )


def plan_layout_from(
    sampler: Sampler,
    facts: Callable[[], DatasetLayout],
    budget: Callable[[], int | None],
    measure: Measure,
    block_rows: int | None = None,
    window_blocks: int | None = None,
) -> BlockLayout | None:
    """:func:`plan_layout` from facts gathered elsewhere (a ``RemoteDataset``: the server's
    pages, memory budget and storage). Each callable is called only when its answer is
    needed: ``facts`` not for other modes, nor for ADAPTIVE on several ranks (which
    never picks BLOCK); ``budget`` on one rank; ``measure`` as ``choose_layout`` says."""
    mode, shards = mode_and_shards(sampler)
    if mode not in (Shuffle.BLOCK, Shuffle.ADAPTIVE):
        return None
    if mode is Shuffle.ADAPTIVE and shards != 1:
        return None  # as choose_layout decides, without asking for the facts
    layout = facts()
    return choose_layout(
        adaptive=mode is Shuffle.ADAPTIVE,
        num_shards=shards,
        page_starts=layout.page_starts,
        num_rows=layout.num_rows,
        data_bytes=layout.data_bytes,
        page_bytes=layout.page_bytes,
        block_rows=block_rows,
        window_blocks=window_blocks,
        memory_budget=budget() if shards == 1 else None,
        measure=measure,
    )
