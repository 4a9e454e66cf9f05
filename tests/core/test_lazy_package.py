"""``import mrecord`` loads only its table of names; each public name is the object
its module defines, loaded on first use (``mrecord convert`` starts without the reader,
the pipeline, OpenCV and the training code)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mrecord

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
