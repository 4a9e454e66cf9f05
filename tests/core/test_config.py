"""mrecord.config: setters validate, getters return what was set."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mrecord import config


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    config.reset()


def test_seed_round_trips() -> None:
    config.set_seed(1234)
    assert config.get_seed() == 1234


@pytest.mark.parametrize(
    ("setter", "value", "error"),
    [
        (config.set_seed, -1, ValueError),
        (config.set_seed, "1", TypeError),
        (config.set_seed, True, TypeError),
        (config.set_prefetch_size, 0, ValueError),
        (config.set_num_parallel_workers, 0, ValueError),
        (config.set_auto_offload, 1, TypeError),
        (config.set_op_timeout, 0, ValueError),
    ],
)
def test_bad_values_are_refused(setter: object, value: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        setter(value)  # type: ignore[operator]


def test_reset_restores_defaults() -> None:
    config.set_prefetch_size(2)
    config.set_auto_offload(True)
    config.reset()
    assert config.get_prefetch_size() == 16
    assert config.get_auto_offload() is False
    assert config.get_op_timeout() == 1900.0
