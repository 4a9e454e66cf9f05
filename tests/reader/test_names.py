"""The names a user types for a dataset open it through every entry point.

``FileWriter("train.mrecord", shard_num=4)`` writes ``train.mrecord0`` ..
``train.mrecord3``; the base name ``train.mrecord`` (what docs/TORCH.md and
``mrecord --help`` use) and a folder holding one dataset open the whole dataset in the
library, the pipeline, the torch datasets, the CLI and the server, as any shard does
(MindSpore's rule). A name that is none of these gets a hint that counts the shards.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from mrecord import DatasetReader, MindDataset
from mrecord.cli.main import cli
from mrecord.errors import DatasetNotFoundError
from tests.factory import MakeDataset

ROWS = 20
HOWS = ["base", "shard2", "folder"]


def run(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def write(
    make: MakeDataset,
    folder: Path,
    name: str = "train.mrecord",
    shards: int = 4,
    rows: int = ROWS,
) -> Path:
    """``rows`` rows of ``make_dataset`` (``id`` = the row number); returns the first file."""
    return make(rows, shards=shards, folder=folder, name=name)


def names(make_dataset: MakeDataset, tmp_path: Path) -> dict[str, Path]:
    """{how the dataset is named: that name} for a 4-shard dataset and a one-dataset folder."""
    write(make_dataset, tmp_path)
    write(make_dataset, tmp_path / "folder", "only.mrecord")
    return {
        "base": tmp_path / "train.mrecord",
        "shard2": tmp_path / "train.mrecord2",
        "folder": tmp_path / "folder",
    }


@pytest.mark.parametrize("how", HOWS)
def test_library_and_pipeline_open_base_name_any_shard_and_folder(
    make_dataset: MakeDataset, tmp_path: Path, how: str
) -> None:
    path = names(make_dataset, tmp_path)[how]
    with DatasetReader.open(path) as reader:
        assert reader.num_rows == ROWS and len(reader.files) == 4
    ds = MindDataset(str(path), shuffle=False)
    assert ds.get_dataset_size() == ROWS
    got = [int(row["id"]) for row in ds.create_dict_iterator(num_epochs=1, output_numpy=True)]
    assert got == list(range(ROWS))


@pytest.mark.parametrize("how", HOWS)
def test_torch_datasets_open_base_name_any_shard_and_folder(
    make_dataset: MakeDataset, tmp_path: Path, how: str
) -> None:
    pytest.importorskip("torch")
    from mrecord.torch import MapDataset, StreamingDataset

    path = names(make_dataset, tmp_path)[how]
    stream = StreamingDataset(path, shuffle=False, rank=0, world_size=1)
    assert sorted(int(s["id"]) for s in stream) == list(range(ROWS))
    assert len(MapDataset(path)) == ROWS


@pytest.mark.parametrize("how", ["base", "shard2", "folder"])
def test_cli_info_opens_base_name_any_shard_and_folder(
    make_dataset: MakeDataset, tmp_path: Path, how: str
) -> None:
    result = run("info", "--json", names(make_dataset, tmp_path)[how])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["rows"] == ROWS and info["shards"] == 4


@pytest.mark.parametrize("how", HOWS)
def test_serve_opens_base_name_any_shard_and_folder(
    make_dataset: MakeDataset, tmp_path: Path, how: str
) -> None:
    pytest.importorskip("starlette")
    from mrecord.serve.server.registry import open_datasets, parse_dataset_args

    path = names(make_dataset, tmp_path)[how]
    opened = open_datasets(parse_dataset_args([str(path)]))
    try:
        [(name, served)] = opened.items()
        assert name == ("folder" if how == "folder" else "train")  # a folder: its name
        assert served.summary()["rows"] == ROWS and served.summary()["shards"] == 4
    finally:
        for served in opened.values():
            served.close()


@pytest.mark.parametrize(("shards", "typed"), [(16, "x.mrecord0"), (200, "x.mrecord0")])
def test_hint_counts_every_shard(
    make_dataset: MakeDataset, tmp_path: Path, shards: int, typed: str
) -> None:
    first = write(make_dataset, tmp_path, "x.mrecord", shards=shards, rows=shards)
    with pytest.raises(DatasetNotFoundError) as caught:
        DatasetReader.open(tmp_path / typed)
    message = str(caught.value)
    assert f"did you mean {str(first)!r}" in message
    assert f"a dataset of {shards} shards" in message


def test_a_base_name_of_another_dataset_is_not_opened(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    """``x.mrecord1`` (the 2nd of 2 shards of ``x.mrecord``) is no base name of ``x.mrecord10``."""
    write(make_dataset, tmp_path, "x.mrecord1", shards=2)  # x.mrecord10, x.mrecord11
    with pytest.raises(DatasetNotFoundError, match="did you mean"):
        DatasetReader.open(tmp_path / "x.mrecord")
    assert np.array_equal(
        DatasetReader.open(tmp_path / "x.mrecord1").read_rows(np.arange(2)).columns["id"], [0, 1]
    )
