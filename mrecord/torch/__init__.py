"""PyTorch training on mrecord, with exact and elastic mid-epoch resume (``docs/TORCH.md``).

::

    from mrecord.torch import StreamingDataset, StreamingDataLoader
    ds = StreamingDataset("train.mrecord", batch_size=64, seed=0)   # rank/world from DDP
    loader = StreamingDataLoader(ds, num_workers=4)
    loader.load_state_dict(checkpoint)        # optional: resume, any world size
    for batch in loader: ...
    checkpoint = loader.state_dict()          # a small JSON-serialisable dict

Needs torch (``pip install 'mrecord[torch]'``), imported when one of the torch
classes is first used; :func:`audit` and :func:`sample_rng` work without it.
Nothing in ``format``/``reader``/``writer``/``pipeline`` imports this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mrecord.torch.audit import AuditReport, EpochAudit, audit
from mrecord.torch.plan import sample_rng

if TYPE_CHECKING:
    from mrecord.torch.loader import StreamingDataLoader
    from mrecord.torch.map_dataset import MapDataset
    from mrecord.torch.sampler import PermutationSampler
    from mrecord.torch.streaming import StreamingDataset
    from mrecord.torch.transport import collate

__all__ = [
    "AuditReport",
    "EpochAudit",
    "MapDataset",
    "PermutationSampler",
    "StreamingDataLoader",
    "StreamingDataset",
    "audit",
    "collate",
    "sample_rng",
]

_LAZY = {
    "collate": "mrecord.torch.transport",
    "MapDataset": "mrecord.torch.map_dataset",
    "PermutationSampler": "mrecord.torch.sampler",
    "StreamingDataLoader": "mrecord.torch.loader",
    "StreamingDataset": "mrecord.torch.streaming",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mrecord.torch' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
