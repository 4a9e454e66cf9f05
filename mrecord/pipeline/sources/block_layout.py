"""The block layout a ``MindDataset`` reads with: page boundaries, sizes, ADAPTIVE's choice.

``Shuffle.BLOCK`` and ``Shuffle.ADAPTIVE`` take a
:class:`~mrecord.sampling.shuffle.block.BlockLayout`; this module builds it once per
sampler from the reader's pages and, where allowed, measured numbers:

- ``block_rows`` / ``window_blocks`` given: used as given (nothing measured).
- one rank (no ``num_shards``): the storage under the files is measured
  (``mrecord.reader.layout.storage_profile``, cached per device) with this process's
  memory budget, and the sizes come from ``plan_block_sizes``.
- several ranks: nothing is measured. Ranks on different hosts would measure different
  numbers and cut different blocks; their shards must split one order. The sizes come
  from the dataset alone (4 MiB blocks, a 256 MiB budget) unless given.
- ``Shuffle.ADAPTIVE`` on one rank: when the data is larger than the memory budget, the
  storage is measured and ``prefers_block`` decides; sharded, ADAPTIVE never picks BLOCK.

Sizes measured in one process may differ in the next (a restarted job): for a resume
that must be exact across restarts, pass the sizes (``ds.block_layout`` shows those
chosen).
"""

from __future__ import annotations

from mrecord.reader.dataset_reader import DatasetReader
from mrecord.reader.layout import dataset_layout, memory_budget, storage_profile
from mrecord.sampling import Sampler, Shuffle
from mrecord.sampling.shuffle._common import check_option
from mrecord.sampling.shuffle.block import BlockLayout, plan_block_sizes, prefers_block

__all__ = ["check_block_sizes", "plan_layout"]


def check_block_sizes(block_rows: int | None, window_blocks: int | None) -> None:
    """Validate ``block_rows`` / ``window_blocks`` arguments (None: chosen by measurement)."""
    if block_rows is not None:
        check_option("block_rows", block_rows)
    if window_blocks is not None:
        check_option("window_blocks", window_blocks)


def _mode_and_shards(sampler: Sampler) -> tuple[Shuffle | None, int]:
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
    mode, shards = _mode_and_shards(sampler)
    if mode not in (Shuffle.BLOCK, Shuffle.ADAPTIVE):
        return None
    facts = dataset_layout(reader)
    measure = shards == 1
    budget = memory_budget() if measure else None
    profile = None
    adaptive = False
    if mode is Shuffle.ADAPTIVE:
        if not measure or budget is None or facts.data_bytes <= budget:
            return None
        profile = storage_profile(reader)
        adaptive = profile is not None and prefers_block(
            data_bytes=facts.data_bytes,
            num_rows=facts.num_rows,
            iops=profile.iops,
            bandwidth=profile.bandwidth,
            memory_budget=budget,
        )
        if not adaptive:
            return None
    elif measure and (block_rows is None or window_blocks is None):
        profile = storage_profile(reader)
    planned_rows, planned_window, why = plan_block_sizes(
        num_rows=facts.num_rows,
        data_bytes=facts.data_bytes,
        page_bytes=facts.page_bytes,
        iops=None if profile is None else profile.iops,
        bandwidth=None if profile is None else profile.bandwidth,
        memory_budget=budget,
    )
    if block_rows is not None or window_blocks is not None:
        why = "given" if block_rows is not None and window_blocks is not None else why
    return BlockLayout(
        page_starts=facts.page_starts,
        block_rows=planned_rows if block_rows is None else block_rows,
        window_blocks=planned_window if window_blocks is None else window_blocks,
        adaptive=adaptive,
        why=why,
    )
