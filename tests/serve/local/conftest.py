"""Fixtures of the same-host transport tests: the datasets, a server of them, their values.

Module-scoped: each test module of this folder writes its own datasets and starts its own
server, and runs under a fixed seed (``_seed``), as the single module they came from did.
"""


from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mrecord
from mrecord import DatasetReader, config
from mrecord.serve.server.registry import ServedDataset, open_datasets
from mrecord.serve.server.run import ServerThread
from tests.serve.local.helpers import (
    COLUMNS,
    _remote,
    _write_images,
    _write_mixed,
    _write_sizes,
)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_mixed(tmp_path_factory.mktemp("mixed") / "mixed.mrecord")


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mixed``'s rows with compressed bytes values: they cannot be shared in place, so
    the same-host server copies them into the reader's segment."""
    return _write_mixed(tmp_path_factory.mktemp("packed") / "packed.mrecord", compress=True)


@pytest.fixture(scope="module")
def sizes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_sizes(tmp_path_factory.mktemp("sizes") / "sizes.mrecord")


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_images(tmp_path_factory.mktemp("images") / "images.mrecord")


@pytest.fixture(scope="module")
def server(mixed: Path, packed: Path, sizes: Path) -> Iterator[ServerThread]:
    with ServerThread({"mixed": mixed, "packed": packed, "sizes": sizes}) as srv:
        assert srv.local_socket_path is not None
        yield srv


@pytest.fixture(scope="module")
def truth(mixed: Path) -> dict[str, list[Any]]:
    """Every value of ``mixed``, read from the files."""
    with DatasetReader.open(mixed) as reader:
        block = reader.read_rows(np.arange(reader.num_rows))
        return {name: list(block.columns[name]) for name in COLUMNS}


@pytest.fixture(autouse=True, scope="module")
def _seed() -> Iterator[None]:
    old = config.get_seed()
    config.set_seed(4321)
    yield
    config.set_seed(old)


@pytest.fixture(scope="module")
def pairs(server: ServerThread) -> dict[str, tuple[mrecord.RemoteDataset, ...]]:
    """name -> (local, http) RemoteDatasets of ``mixed`` and of ``packed``."""
    return {
        name: (_remote(server, "local", name=name), _remote(server, "http", name=name))
        for name in ("mixed", "packed")
    }


@pytest.fixture(scope="module")
def served(mixed: Path) -> Iterator[dict[str, ServedDataset]]:
    datasets = open_datasets({"mixed": mixed})
    yield datasets
    for ds in datasets.values():
        ds.close()
