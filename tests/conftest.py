"""Shared pytest setup: hypothesis profiles, the local Ray cluster of the Ray tests, and
the headless Chromium of the web-page tests.

``default`` is quick, ``ci`` is derandomized (same examples every run), and
``thorough`` is the opt-in long run: ``HYPOTHESIS_PROFILE=thorough make test``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from harness.browser import chromium_path, launch_chromium

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
