"""``config.on_reset``: layers above config hear about ``reset()`` and ``set_seed()``
through a registration, not through ``sys.modules`` (an edge the layering test could not
see)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from mrecord import config
from mrecord.transforms import seeding


@pytest.fixture(autouse=True)
def _fresh_config() -> Iterator[None]:
    config.reset()
    yield
    config.reset()


def test_listeners_hear_reset_and_set_seed_once_each() -> None:
    heard: list[int] = []

    def listener() -> None:
        heard.append(config.get_seed())  # may read settings: called outside the lock

    try:
        assert config.on_reset(listener) is listener
        config.on_reset(listener)  # twice: still called once per event
        config.set_seed(7)
        config.reset()
        config.set_prefetch_size(4)  # other settings are not a reset
    finally:
        config._reset_listeners.remove(listener)
    assert heard == [7, 5489]


def test_seeding_registers_itself() -> None:
    assert seeding.reset_eager_seeds in config._reset_listeners


def test_set_seed_restarts_the_seedless_eager_sequence() -> None:
    config.set_seed(11)
    first = [seeding.next_eager_seed() for _ in range(3)]
    config.set_seed(11)  # the same seed again: the sequence restarts
    assert [seeding.next_eager_seed() for _ in range(3)] == first
    seeding.next_eager_seed()
    config.reset()
    config.set_seed(11)
    assert [seeding.next_eager_seed() for _ in range(3)] == first


def test_config_reaches_no_module_through_sys_modules() -> None:
    """The old hook looked ``mrecord.transforms.seeding`` up in ``sys.modules``."""
    source = Path(config.__file__).read_text()
    imported = {
        alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert "sys" not in imported
    assert "sys.modules" not in source
