"""Train a tiny PyTorch model on an mrecord dataset (needs pip install 'mrecord[torch]').

Streaming (shuffled each epoch, split over ranks and DataLoader workers) and map-style
(random access with DistributedSampler). Run: python examples/torch_training.py [OUT_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from mrecord import Shuffle
from mrecord.torch import MapDataset, StreamingDataset

from write_dataset import write_dataset


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    first = write_dataset(out / "example.mrecord", rows=512)

    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(32 * 32 * 3, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    # Rank and world size come from torch.distributed (or RANK/WORLD_SIZE) when set;
    # here the whole dataset goes to this one process.
    stream = StreamingDataset(str(first), columns=["image", "label"], shuffle=Shuffle.GLOBAL)
    loader = DataLoader(stream, batch_size=64, num_workers=2)
    for epoch in range(2):
        stream.set_epoch(epoch)  # a new permutation, the same on every rank
        seen = 0
        for batch in loader:
            images = torch.as_tensor(batch["image"]).float() / 255
            labels = torch.as_tensor(batch["label"]).long()
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += len(labels)
        print(f"epoch {epoch}: {seen} samples, last loss {loss.item():.3f}")

    # Map-style: __getitems__ makes each batch one vectorized read.
    mapped = MapDataset(str(first), columns=["label"])
    print("map-style:", len(mapped), "rows; row 5 label:", mapped[5]["label"])


if __name__ == "__main__":
    main()
