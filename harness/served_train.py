"""A small DDP training job that reads its data from ``mrecord serve`` (one torchrun node).

::

    torchrun --nnodes 2 --node-rank R --nproc-per-node 1 --master-addr IP --master-port P \\
        harness/served_train.py --url http://SERVER:8750/api/datasets/NAME \\
        --audit AUDIT_DIR --out OUT_DIR

docs/TORCH.md's recipe with a served dataset where the files were: gloo across the
hosts, ``StreamingDataset`` + ``StreamingDataLoader`` (DataLoader workers each open
their own connections), a linear model on ``vec`` -> ``label`` under
``DistributedDataParallel``, the visitation audit in ``--audit``. Each rank writes
``OUT_DIR/rank{R}.json``: the ``id`` values its batches carried, per epoch, and the
model's final weights (the same on every rank when the all-reduces went through).
The token comes from ``$MRECORD_SERVE_TOKEN``. Used by tests/serve/test_serve_hosts_torch.py.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.distributed as dist

from mrecord import Shuffle
from mrecord.torch import StreamingDataLoader, StreamingDataset


def main() -> None:
    """Parse the arguments, train, write this rank's record."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--audit", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ds = StreamingDataset(
        args.url,
        columns=["id", "label", "vec"],
        shuffle=Shuffle.GLOBAL,
        seed=args.seed,
        batch_size=args.batch_size,
        audit_dir=args.audit,
        storage_options={"transport": "http"},
    )
    loader = StreamingDataLoader(ds, num_workers=args.workers)
    torch.manual_seed(0)  # the same initial weights on every rank
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 7))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen: list[list[int]] = []
    for epoch in range(args.epochs):
        ds.set_epoch(epoch)
        ids: list[int] = []
        for batch in loader:
            loss = torch.nn.functional.cross_entropy(model(batch["vec"]), batch["label"].long())
            optimizer.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            ids += [int(i) for i in batch["id"]]
        seen.append(ids)
    weights = [float(w) for w in model.module.weight.detach().reshape(-1)]
    record = {"rank": rank, "world": dist.get_world_size(), "ids": seen, "weights": weights}
    Path(args.out, f"rank{rank}.json").write_text(json.dumps(record))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
