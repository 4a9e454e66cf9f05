"""Shared pytest setup: hypothesis profiles, and the local Ray cluster of the Ray tests.

``default`` is quick, ``ci`` is derandomized (same examples every run), and
``thorough`` is the opt-in long run: ``HYPOTHESIS_PROFILE=thorough make test``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

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
