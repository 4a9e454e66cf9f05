"""``import mrecord`` loads only its table of names; each public name is the object
its module defines, loaded on first use (``mrecord convert`` starts without the reader,
the pipeline, OpenCV and the training code)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import mrecord
import mrecord.convert

HEAVY = ("mrecord.pipeline", "mrecord.reader", "mrecord.vision", "mrecord.train", "cv2")


def test_import_loads_none_of_the_heavy_modules() -> None:
    code = (
        "import sys, mrecord, mrecord.cli.main\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", sorted(set(mrecord.__all__) - {"__version__"}))
def test_every_public_name_resolves(name: str) -> None:
    value = getattr(mrecord, name)
    assert value is not None
    assert name in dir(mrecord)


def test_names_are_the_defining_modules_objects() -> None:
    from mrecord import FileWriter, MindDataset, Shuffle, mstype, vision
    from mrecord.pipeline import MindDataset as pipeline_mind_dataset
    from mrecord.sampling import Shuffle as sampling_shuffle
    from mrecord.writer.file_writer import FileWriter as writer_file_writer

    assert FileWriter is writer_file_writer
    assert MindDataset is pipeline_mind_dataset
    assert Shuffle is sampling_shuffle
    assert mstype is mrecord.dtype
    assert vision is sys.modules["mrecord.vision"]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = mrecord.NoSuchThing
    with pytest.raises(ImportError):
        exec("from mrecord import NoSuchThing")


def test_an_image_folder_conversion_loads_no_other_source(tmp_path: Path) -> None:
    """``mrecord convert imagefolder`` imports its own source's module, not the
    MindRecord, mrecord, Arrow, CIFAR-10 or MNIST readers (nor the dataset reader), and,
    run from a script (stderr not a terminal: no bar), not tqdm."""
    folder = tmp_path / "photos" / "cat"
    folder.mkdir(parents=True)
    from PIL import Image

    Image.new("RGB", (8, 8), (200, 10, 10)).save(folder / "a.jpg")
    others = (
        "mrecord.convert.mindrecord_source",
        "mrecord.convert.mrecord_source",
        "mrecord.convert.arrow_sources",
        "mrecord.convert.cifar10",
        "mrecord.convert.mnist",
        "mrecord.reader",
        "tqdm",
    )
    code = (
        "import sys\n"
        "from mrecord.cli.main import main\n"
        f"sys.argv = ['mrecord', 'convert', 'imagefolder', {str(tmp_path / 'photos')!r},"
        f" {str(tmp_path / 'out.mrecord')!r}, '--workers', '1']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        f"print(sorted(m for m in {others!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "out.mrecord").exists()


@pytest.mark.parametrize("name", sorted(mrecord.convert.__all__))
def test_every_convert_name_resolves_to_its_modules_object(name: str) -> None:
    import importlib

    import mrecord.convert as package

    value = getattr(package, name)
    defining = importlib.import_module(f"mrecord.convert.{package._WHERE[name]}")
    assert value is getattr(defining, name)
    assert name in dir(package)


def test_sources_maps_every_kind_to_its_class() -> None:
    from mrecord.convert import SOURCES
    from mrecord.convert.arrow_sources import HfSource
    from mrecord.convert.imagefolder import ImageFolderSource
    from mrecord.convert.npz import NpzSource

    assert sorted(SOURCES) == [
        "arrow", "cifar10", "csv", "hf", "imagefolder", "mindrecord", "mnist", "mrecord",
        "npy", "npz", "parquet",
    ]  # fmt: skip
    assert SOURCES["imagefolder"] is ImageFolderSource
    assert SOURCES["npy"] is SOURCES["npz"] is NpzSource
    assert SOURCES["hf"] is HfSource
    assert len(SOURCES) == 11 and "csv" in SOURCES and "tfrecord" not in SOURCES
    with pytest.raises(KeyError):
        SOURCES["tfrecord"]
