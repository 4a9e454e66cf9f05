"""A conversion SIGKILLed anywhere and resumed ends with the bytes of an uninterrupted one.

The worker and its kill points are ``reliability/convert_crash.py``: deterministic
kills between batches, at every step of a checkpoint and at every step of the
commit, and kills at random instants. After each kill no dataset file is visible
(nothing half-done at the destination); ``--resume`` then finishes the conversion
and every data and ``.db`` byte equals the clean run's, with no file left over.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from pathlib import Path

import pytest

from mrecord.convert import SOURCES, WriteOptions, write_source
from mrecord.errors import CheckpointError
from mrecord.storage.naming import journal_path
from mrecord.writer.resume import CHECKPOINT_STEPS, read_resume_state, resume_dir
from reliability import convert_crash as cc

IMAGES = 120


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cc.make_image_folder(tmp_path_factory.mktemp("src") / "images", IMAGES)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory, images: Path) -> tuple[dict[str, bytes], float]:
    """The uninterrupted conversion's files, and how long the worker ran."""
    dst = tmp_path_factory.mktemp("clean") / "x.mrecord"
    started = time.monotonic()
    done = cc.run_worker("imagefolder", images, dst)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["DONE", str(IMAGES), "0"]
    return cc.dataset_bytes(dst), seconds


def kill_and_resume(
    images: Path,
    dst: Path,
    kill: str,
    *,
    workers: int = 1,
    delay: float | None = None,
    clean: dict[str, bytes] | None = None,
) -> tuple[int, int]:
    """Kill a conversion into ``dst``; check nothing half-done is visible; resume it.
    Returns the killed run's return code and the row the resumed run started at.

    A kill at a random instant (``delay``) can land while the commit publishes (the
    journal is there: readers and the next writer roll it forward, as after the
    ``commit:`` kills) or after it, while the process exits: then the dataset is visible
    and must be the whole of ``clean``."""
    killed = cc.run_worker("imagefolder", images, dst, workers=workers, kill=kill, delay=delay)
    assert killed.returncode in (-9, 0), killed.stderr
    if killed.returncode == 0:  # a random delay longer than the run: nothing to resume
        return 0, IMAGES
    if not kill.startswith("commit:"):
        visible = cc.visible_files(dst)
        if visible and delay is not None and clean is not None:
            publishing = journal_path(dst.parent, dst.name).exists()
            finished = not publishing and read_resume_state(dst) is None
            # after the publish, before the process removed its checkpoint: the whole
            # dataset beside the sidecar, which --resume removes (as after commit:published)
            assert publishing or cc.dataset_bytes(dst, checkpoint_left=True) == clean, (
                f"half-done files visible after {delay:.2f} s"
            )
            if finished:  # killed as it exited: nothing to resume, and --resume says so
                again = cc.run_worker("imagefolder", images, dst, workers=workers, resume=True)
                assert again.returncode != 0 and "no checkpoint of an unfinished" in again.stderr
                return killed.returncode, IMAGES
        else:
            assert visible == [], f"half-done files visible after {kill}"
    resumed = cc.run_worker("imagefolder", images, dst, workers=workers, resume=True)
    assert resumed.returncode == 0, resumed.stderr
    words = resumed.stdout.split()
    assert words[:2] == ["DONE", str(IMAGES)]
    return killed.returncode, int(words[2])


@pytest.mark.parametrize(
    "kill",
    [
        "rows:13",
        "rows:119",
        *(f"step:{step}:{k}" for step, k in zip(CHECKPOINT_STEPS, (1, 3, 5, 7), strict=True)),
        "commit:journal",
        "commit:renamed_one",
        "commit:renamed_all",
    ],
)
def test_deterministic_kill_then_resume_equals_clean(
    tmp_path: Path, images: Path, clean: tuple[dict[str, bytes], float], kill: str
) -> None:
    """Between batches, inside a checkpoint, inside the commit: the same bytes in the end."""
    code, resumed_at = kill_and_resume(images, tmp_path / "x.mrecord", kill)
    assert code == -9
    assert cc.dataset_bytes(tmp_path / "x.mrecord") == clean[0]
    if kill == "rows:119":
        assert resumed_at > 0, "a kill near the end must not start over"
    assert not resume_dir(tmp_path / "x.mrecord").exists()


@pytest.mark.parametrize("kill", ["rows:40", "commit:renamed_one"])
def test_kill_then_resume_with_worker_processes(
    tmp_path: Path, images: Path, clean: tuple[dict[str, bytes], float], kill: str
) -> None:
    """With two worker processes (killed along with the converter) too."""
    code, _ = kill_and_resume(images, tmp_path / "x.mrecord", kill, workers=2)
    assert code == -9
    assert cc.dataset_bytes(tmp_path / "x.mrecord") == clean[0]


def test_a_kill_after_the_publish_leaves_the_whole_dataset_and_resume_removes_the_checkpoint(
    tmp_path: Path, images: Path, clean: tuple[dict[str, bytes], float]
) -> None:
    """Killed after the commit published, before the process removed its checkpoint (a
    random kill landed there in CI): the dataset is whole beside the sidecar, and
    ``--resume`` finishes by removing the sidecar."""
    dst = tmp_path / "x.mrecord"
    killed = cc.run_worker("imagefolder", images, dst, kill="step:discard:1")
    assert killed.returncode == -9
    assert not journal_path(dst.parent, dst.name).exists()
    assert read_resume_state(dst) is not None
    assert cc.dataset_bytes(dst, checkpoint_left=True) == clean[0]
    resumed = cc.run_worker("imagefolder", images, dst, resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert cc.dataset_bytes(dst) == clean[0]
    assert not resume_dir(dst).exists()


def test_random_kills_then_resume_equal_clean(
    tmp_path: Path, images: Path, clean: tuple[dict[str, bytes], float]
) -> None:
    """SIGKILL at random instants of the run (the reliability harness's way)."""
    rng = random.Random("convert-resume")
    for trial in range(2):
        dst = tmp_path / str(trial) / "x.mrecord"
        dst.parent.mkdir()
        delay = rng.uniform(0.2, 0.9 * clean[1])
        kill_and_resume(images, dst, "none", workers=1 + trial % 2, delay=delay, clean=clean[0])
        assert cc.dataset_bytes(dst) == clean[0], f"trial {trial}, killed after {delay:.2f} s"


def test_resume_refuses_other_options_naming_the_checkpoint(tmp_path: Path, images: Path) -> None:
    """A checkpoint is only resumed with the source and options that wrote it."""
    dst = tmp_path / "x.mrecord"
    assert cc.run_worker("imagefolder", images, dst, kill="rows:65").returncode == -9
    options = WriteOptions(
        shard_num=cc.SHARDS, page_size=cc.PAGE_SIZE, batch_rows=cc.BATCH_ROWS + 1, resume=True
    )
    with SOURCES["imagefolder"](images) as source, pytest.raises(CheckpointError) as info:
        write_source(source, dst, options)
    assert "state.msgpack" in str(info.value) and "batch_rows" in str(info.value)
    assert cc.visible_files(dst) == []
    # The checkpoint is still there: the right options resume it.
    resumed = cc.run_worker("imagefolder", images, dst, resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert int(resumed.stdout.split()[2]) > 0


def test_damaged_checkpoint_is_refused_naming_the_file(tmp_path: Path, images: Path) -> None:
    """Durable bytes that no longer match their checksums are never continued."""
    dst = tmp_path / "x.mrecord"
    assert cc.run_worker("imagefolder", images, dst, kill="rows:65").returncode == -9
    data = resume_dir(dst) / "x.mrecord0.data"
    state = read_resume_state(dst)
    assert state is not None
    durable = state["shards"][0]["length"]
    raw = bytearray(data.read_bytes())
    raw[durable - 1] ^= 0xFF  # the last byte of the last durable chunk
    data.write_bytes(bytes(raw))
    options = WriteOptions(
        shard_num=cc.SHARDS, page_size=cc.PAGE_SIZE, batch_rows=cc.BATCH_ROWS, resume=True
    )
    with SOURCES["imagefolder"](images) as source, pytest.raises(CheckpointError) as info:
        write_source(source, dst, options)
    assert "x.mrecord0.data" in str(info.value)
    assert cc.visible_files(dst) == []


def test_run_without_resume_starts_over_and_cleans_up(
    tmp_path: Path, images: Path, clean: tuple[dict[str, bytes], float]
) -> None:
    """Without --resume, a killed run's leftovers are removed and the result is the same."""
    dst = tmp_path / "x.mrecord"
    assert cc.run_worker("imagefolder", images, dst, kill="rows:65").returncode == -9
    assert resume_dir(dst).exists()
    again = cc.run_worker("imagefolder", images, dst)
    assert again.returncode == 0 and again.stdout.split()[2] == "0"
    assert cc.dataset_bytes(dst) == clean[0]


def test_npz_source_without_a_plan_resumes(tmp_path: Path) -> None:
    """A source read one batch after another (no plan) resumes to the same bytes too."""
    src = cc.make_npz(tmp_path / "a.npz", 120)
    clean = tmp_path / "clean" / "x.mrecord"
    clean.parent.mkdir()
    assert cc.run_worker("npz", src, clean).returncode == 0
    dst = tmp_path / "killed" / "x.mrecord"
    dst.parent.mkdir()
    assert cc.run_worker("npz", src, dst, kill="rows:80").returncode == -9
    resumed = cc.run_worker("npz", src, dst, resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert int(resumed.stdout.split()[2]) > 0
    assert cc.dataset_bytes(dst) == cc.dataset_bytes(clean)


def test_cli_resume_and_workers(tmp_path: Path, images: Path) -> None:
    """``mrecord convert --workers 2 --checkpoint 4K``, killed, then ``--resume``: the
    rows of the source, a message saying where it resumed, no sidecar left."""
    from click.testing import CliRunner

    from mrecord.cli.main import cli
    from mrecord.reader.dataset_reader import DatasetReader

    dst = tmp_path / "x.mrecord"
    assert cc.run_worker("imagefolder", images, dst, kill="rows:65").returncode == -9
    args = ["convert", "imagefolder", str(images), str(dst), "--shards", str(cc.SHARDS)]
    args += ["--page-size", str(cc.PAGE_SIZE), "--batch-rows", str(cc.BATCH_ROWS)]
    args += ["--checkpoint", "4K", "--workers", "2"]
    wrong = CliRunner().invoke(cli, [*args[:-2], "--batch-rows", "5", "--resume"])
    assert wrong.exit_code != 0 and "state.msgpack" in wrong.output
    result = CliRunner().invoke(cli, [*args, "--resume"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "resumed at row" in result.output
    assert not resume_dir(dst).exists()
    with DatasetReader.open(dst.with_name("x.mrecord0")) as reader:
        assert reader.num_rows == IMAGES


def test_resume_of_a_finished_conversion_says_there_is_nothing_to_resume(
    tmp_path: Path, images: Path
) -> None:
    """--resume where a conversion already finished (the dataset is there, no checkpoint)
    is refused saying so and naming --overwrite; the dataset is untouched."""
    from mrecord.errors import DatasetExistsError

    dst = tmp_path / "x.mrecord"
    options = WriteOptions(shard_num=cc.SHARDS, workers=1)
    with SOURCES["imagefolder"](images) as source:
        write_source(source, dst, options)
    before = cc.dataset_bytes(dst)
    with (
        SOURCES["imagefolder"](images) as source,
        pytest.raises(DatasetExistsError, match="no checkpoint of an unfinished conversion"),
    ):
        write_source(source, dst, replace(options, resume=True))
    assert cc.dataset_bytes(dst) == before
