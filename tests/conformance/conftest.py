"""Fixtures of the conformance tests: a clean config after each test, and a small dataset."""


from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from mrecord import FileWriter, config


@pytest.fixture(autouse=True)
def _reset_config() -> Iterator[None]:
    yield
    config.reset()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The generator's dataset: fields declared out of name order."""
    path = tmp_path_factory.mktemp("mixed") / "mixed.mrecord"
    with FileWriter(path, shard_num=1) as writer:
        writer.add_schema(
            {
                "id": {"type": "int64"},
                "cls": {"type": "int32"},
                "blob": {"type": "bytes"},
                "f32": {"type": "float32", "shape": [2]},
                "name": {"type": "string"},
            },
            "s",
        )
        writer.write_raw_data(
            [
                {
                    "id": i,
                    "cls": i % 3,
                    "blob": bytes([i, 255]),
                    "name": f"r{i}",
                    "f32": np.array([i, 0.5], dtype=np.float32),
                }
                for i in range(4)
            ]
        )
    return str(writer.files[0])
