"""What columns mean survives a round trip: class names and image columns, stored in the
description's ``"features"`` (docs/FORMAT.md), written by the converters and ``from_hf``,
read by ``to_hf`` (ClassLabel, Image) and ``mrecord head``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mrecord import DatasetReader
from mrecord.cli.main import cli
from mrecord.convert import convert_cifar10, convert_imagefolder
from tests.convert.test_convert_sources import cifar_dir, image_folder

datasets = pytest.importorskip("datasets")
PIL = pytest.importorskip("PIL.Image")


def features_of(first: Path) -> dict[str, object]:
    with DatasetReader.open(first) as reader:
        desc = reader.shards[0].meta.desc
    assert desc is not None
    data = json.loads(desc)
    assert isinstance(data, dict)
    features = data["features"]
    assert isinstance(features, dict)
    return features


def png(value: int) -> bytes:
    out = io.BytesIO()
    PIL.fromarray(np.full((4, 4, 3), value, np.uint8)).save(out, format="PNG")
    return out.getvalue()


def test_hf_class_label_and_image_round_trip(tmp_path: Path) -> None:
    import mrecord

    names = ["cat", "dog", "emu"]
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=names)}
    )
    source = datasets.Dataset.from_dict(
        {"image": [{"bytes": png(i), "path": None} for i in range(6)], "label": [0, 1, 2] * 2},
        features=features,
    )
    mrecord.from_hf(source, tmp_path / "hf.mrecord")
    assert features_of(tmp_path / "hf.mrecord") == {
        "label": {"class_names": names},
        "image": {"image": True},
    }
    back = mrecord.to_hf(tmp_path / "hf.mrecord")
    assert back.features["label"] == datasets.ClassLabel(names=names)
    assert isinstance(back.features["image"], datasets.Image)
    assert back[4]["label"] == 1
    assert np.asarray(back[4]["image"]).tolist() == np.full((4, 4, 3), 4, np.uint8).tolist()


def test_converters_write_class_names_and_images(tmp_path: Path) -> None:
    root, _ = image_folder(tmp_path)
    convert_imagefolder(root, tmp_path / "folder.mrecord")
    assert features_of(tmp_path / "folder.mrecord") == {
        "label": {"class_names": ["cat", "dog", "emu"]},
        "image": {"image": True},
    }
    cifar_dir(tmp_path, np.random.default_rng(0))
    convert_cifar10(tmp_path / "cifar-10-batches-bin", tmp_path / "c.mrecord")
    cifar = features_of(tmp_path / "c.mrecord")
    # the names of the source's batches.meta.txt (the test folder's: c0 .. c9)
    assert cifar["label"] == {"class_names": [f"c{i}" for i in range(10)]}
    assert "image" not in cifar  # uint8 arrays, not encoded images


def test_head_shows_class_names(tmp_path: Path) -> None:
    root, _ = image_folder(tmp_path)
    convert_imagefolder(root, tmp_path / "folder.mrecord")
    out = CliRunner().invoke(cli, ["head", str(tmp_path / "folder.mrecord"), "-n", "1"]).output
    assert '"label": "0 (cat)"' in out
    raw = CliRunner().invoke(cli, ["head", "--json", str(tmp_path / "folder.mrecord"), "-n", "1"])
    assert '"label":0' in raw.output
