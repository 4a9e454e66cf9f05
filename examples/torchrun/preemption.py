"""Preemption under torchrun: checkpoint on SIGTERM, resume on another world size, audit it.

Run it with torchrun (gloo on one machine here; nccl on GPUs works the same)::

    torchrun --nproc-per-node 2 examples/torchrun/preemption.py --data train.mrecord \\
        --checkpoint ckpt.pt --audit runs/audit
    # ... SIGTERM arrives (a preemption notice: to torchrun, or to every process) ...
    torchrun --nproc-per-node 3 examples/torchrun/preemption.py --data train.mrecord \\
        --checkpoint ckpt.pt --audit runs/audit          # resumes, 3 ranks instead of 2
    mrecord audit runs/audit                            # each row once, replays counted apart

What makes it work (docs/TORCH.md, "Preemption under torchrun"):

1. The SIGTERM handler of each rank only sets a flag; the training loop checks it after
   every step, so the checkpoint is taken between steps, never inside one.
2. DataLoader workers ignore SIGTERM (``worker_init_fn``). A preemption often signals
   every process; a worker killed by it makes the loader raise in the rank
   ("DataLoader worker ... is killed by signal: Terminated") before any save can run.
   The loader's position lives in the rank's main process, so the checkpoint does not
   need the workers; they exit with their rank.
3. The ranks agree to stop at the same step (an ``all_reduce`` of the flag): under DDP they
   move in lockstep, and the data checkpoint is the same dict on every rank.
4. Rank 0 writes the checkpoint atomically (a temporary file, then ``os.replace``).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from mrecord.torch import StreamingDataLoader, StreamingDataset

STOP = False


def on_sigterm(signum: int, frame: Any) -> None:
    """Note the preemption; the loop saves after the current step."""
    global STOP
    STOP = True


def ignore_sigterm(worker_id: int) -> None:
    """DataLoader workers outlive a SIGTERM sent to every process; they exit with the rank."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def save_atomically(state: dict[str, Any], path: Path) -> None:
    tmp = path.with_name(path.name + ".partial")
    torch.save(state, tmp)
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--audit", default=None)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="a stand-in for work")
    parser.add_argument("--progress", type=Path, default=None, help="rank 0 writes its step")
    args = parser.parse_args()

    signal.signal(signal.SIGTERM, on_sigterm)
    dist.init_process_group("gloo")  # rank and world size from torchrun's environment
    rank = dist.get_rank()
    ds = StreamingDataset(args.data, batch_size=args.batch_size, audit_dir=args.audit)
    loader = StreamingDataLoader(
        ds, num_workers=args.workers, worker_init_fn=ignore_sigterm, persistent_workers=False
    )
    if args.checkpoint.exists():
        checkpoint = torch.load(args.checkpoint, weights_only=False)
        loader.load_state_dict(checkpoint["data"])  # any world size's checkpoint
    step = 0
    for epoch in range(loader.state_dict()["epoch"], args.epochs):
        ds.set_epoch(epoch)
        for batch in loader:
            time.sleep(args.step_seconds)  # forward, backward, optimizer step
            step += 1
            if rank == 0 and args.progress is not None:
                args.progress.write_text(str(step))
            stop = torch.tensor([int(STOP)])
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)  # every rank stops at this step
            if stop.item():
                if rank == 0:
                    save_atomically({"data": loader.state_dict()}, args.checkpoint)
                    print(f"preempted: checkpoint at {loader.state_dict()}", flush=True)
                dist.barrier()
                dist.destroy_process_group()
                sys.exit(0)
            del batch
    if rank == 0:
        save_atomically({"data": loader.state_dict()}, args.checkpoint)
        print(f"finished: {args.epochs} epoch(s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
