"""Shared pytest setup: hypothesis profiles, the dataset factory ``make_dataset``, the local
Ray cluster of the Ray tests, and the headless Chromium of the web-page tests.

``default`` is quick, ``ci`` is derandomized (same examples every run), and
``thorough`` is the opt-in long run: ``HYPOTHESIS_PROFILE=thorough make test``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import mrecord.writer.shard_writer as shard_writer
from harness.browser import chromium_path, launch_chromium
from mrecord.testing.mixed import write_mixed
from tests.factory import MakeDataset

settings.register_profile(
    "default", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=500, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Every test's device probe measures (the suite's fake devices must never be kept for the
# real disk, nor a kept profile answer a test): tests/storage/test_device_profiles.py
# turns the kept profiles on with a file of its own. Set here so child processes inherit it.
os.environ["MRECORD_DEVICE_PROFILES"] = "off"


@pytest.fixture
def without_head_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written now have no head index, as format 1.3 wrote them: heads are read from
    in front of each chunk and small chunks from the file (tests of those paths, which
    readers keep for older files and for a damaged index)."""
    monkeypatch.setattr(shard_writer, "HEAD_INDEX", False)


@pytest.fixture(scope="session")
def make_dataset(tmp_path_factory: pytest.TempPathFactory) -> MakeDataset:
    """A factory of small datasets: ``make_dataset(rows, shards=3, folder=None, name=...)``
    writes ``mrecord.testing.mixed``'s dataset (``id`` = the row number, ``label`` = id % 7,
    ``vec``, ``blob``, ``text``, ``points``: every kind of column) and returns its first file.

    ``folder``: where to write (created if missing); by default a fresh temporary folder per
    call, so each call's files are the test's own. ``options`` go to ``write_mixed``
    (``seed``, ``max_blob``, ``text_repeats``, ``index_label``, ``compress``). Session-scoped,
    so module-scoped fixtures can use it too. Tests that need a particular shape (a schema,
    page size or value sizes under test) write their own.
    """

    def make(
        rows: int = 40,
        *,
        shards: int = 3,
        folder: Path | None = None,
        name: str = "mixed.mrecord",
        **options: Any,
    ) -> Path:
        if folder is None:
            folder = tmp_path_factory.mktemp("dataset")
        folder.mkdir(parents=True, exist_ok=True)
        return write_mixed(folder / name, rows, shards=shards, **options)

    return make


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """One local Ray cluster (2 CPUs) shared by every Ray test, shut down at the end."""
    import ray  # in the dev extra: CI runs these tests, never skips them
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium for the whole module (one Playwright per thread is allowed)."""
    if chromium_path() is None:
        pytest.fail("chromium is not installed: run `make browser` (make test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = launch_chromium(pw)
        try:
            yield chromium
        finally:
            chromium.close()
