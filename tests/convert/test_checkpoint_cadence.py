"""When a conversion checkpoints: every ``checkpoint_bytes`` of pages, or once
``CHECKPOINT_SECONDS`` have passed with pages written since (a CPU-bound conversion
writes a GiB slowly, and a kill should not cost it many minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mrecord.convert import SOURCES, WriteOptions, driver, write_source
from mrecord.writer.resume import Checkpointer
from reliability import convert_crash as cc


def count_checkpoints(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the position of every checkpoint made from now on."""
    positions: list[int] = []
    real = Checkpointer.checkpoint

    def checkpoint(self: Checkpointer, position: int, *args: object, **kwargs: object) -> None:
        positions.append(position)
        real(self, position, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Checkpointer, "checkpoint", checkpoint)
    return positions


def convert(images: Path, dst: Path, checkpoint_bytes: int) -> None:
    options = WriteOptions(
        page_size=cc.PAGE_SIZE, batch_rows=cc.BATCH_ROWS, checkpoint_bytes=checkpoint_bytes
    )
    with SOURCES["imagefolder"](images) as source:
        write_source(source, dst, options)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cc.make_image_folder(tmp_path_factory.mktemp("src") / "images", 60)


def test_no_checkpoint_before_the_bytes_or_the_time(
    tmp_path: Path, images: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    positions = count_checkpoints(monkeypatch)
    convert(images, tmp_path / "x.mrecord", checkpoint_bytes=1 << 40)
    assert positions == []


def test_a_checkpoint_once_the_time_has_passed(
    tmp_path: Path, images: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    positions = count_checkpoints(monkeypatch)
    monkeypatch.setattr(driver, "CHECKPOINT_SECONDS", 0.0)
    convert(images, tmp_path / "x.mrecord", checkpoint_bytes=1 << 40)
    # 60 rows in batches of BATCH_ROWS: a checkpoint after each batch that wrote a page
    assert len(positions) >= 2
    assert positions == sorted(set(positions))


def test_a_checkpoint_every_checkpoint_bytes(
    tmp_path: Path, images: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    positions = count_checkpoints(monkeypatch)
    convert(images, tmp_path / "x.mrecord", checkpoint_bytes=1)
    batches = -(-60 // cc.BATCH_ROWS)
    assert 2 <= len(positions) <= batches
