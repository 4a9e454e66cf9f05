"""Which rows, in which order: pure functions of (file row counts, seed, epoch, shard).

Nothing here reads data. An :class:`Order` is a lazy sequence of global row ids
(``len(order)``, ``order.take(positions)``, ``order.iter_chunks(n)``); everything else
builds one:

- :class:`Shuffle` and :data:`SHUFFLES` (``shuffle/``): the shuffle modes, a registry of
  ``(file_row_counts, seed, epoch) -> Order`` functions, one module per algorithm;
- :mod:`~mrecord.sampling.permutation`: the keyed permutation (Feistel network with
  cycle walking) the shuffles use, O(1) memory;
- :mod:`~mrecord.sampling.sharding`: MindSpore's shard split and padding;
- the samplers (``samplers.py``): MindSpore's sampler classes, each
  ``build_order(file_row_counts, seed, epoch) -> Order``;
- :func:`sampler_from_args` (``arguments.py``): a dataset's ``shuffle``/``num_shards``/
  ``shard_id``/``num_samples``/``sampler``/``num_padded`` arguments to one sampler,
  with MindSpore's rules.

Import from here (``from mrecord.sampling import DistributedSampler, sampler_from_args``);
the submodules are the implementation. See ``docs/SHUFFLE_AND_SAMPLERS.md``.
"""

from __future__ import annotations

from mrecord.sampling.arguments import sampler_from_args
from mrecord.sampling.order import SCATTER_SAMPLE, Order, scattered_ids
from mrecord.sampling.permutation import derive_key
from mrecord.sampling.samplers import (
    DatasetSampler,
    DistributedSampler,
    PKSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    SubsetSampler,
    WeightedRandomSampler,
    chain_sampler,
)
from mrecord.sampling.sharding import concat_shard_positions, shard_order
from mrecord.sampling.shuffle import SHUFFLES, Shuffle, parse_shuffle, shuffle_order

__all__ = [
    "SCATTER_SAMPLE",
    "SHUFFLES",
    "DatasetSampler",
    "DistributedSampler",
    "Order",
    "PKSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Shuffle",
    "SubsetRandomSampler",
    "SubsetSampler",
    "WeightedRandomSampler",
    "chain_sampler",
    "concat_shard_positions",
    "derive_key",
    "parse_shuffle",
    "sampler_from_args",
    "scattered_ids",
    "shard_order",
    "shuffle_order",
]
