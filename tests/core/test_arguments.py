"""The ground-floor argument checks (mrecord/arguments.py) and the one worker rule.

``num_parallel_workers`` is an int in [1, 1024] for every op, every source and the config
default, with one message; ``None`` is the config default, read when the source or op is
constructed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mrecord import GeneratorDataset, MindDataset, arguments, config
from mrecord.errors import ArgumentError, WrongTypeError
from mrecord.pipeline.dataset import Dataset
from mrecord.pipeline.ops.map import MapDataset
from mrecord.testing.mixed import write_mixed

RULE = r"^Input num_parallel_workers is not within the required interval of \[1, 1024\]\.$"


@pytest.fixture(autouse=True)
def _fresh_config() -> Iterator[None]:
    config.reset()
    yield
    config.reset()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_mixed(tmp_path_factory.mktemp("args") / "m.mrecord", 40))


def _rows() -> Iterator[tuple[np.ndarray]]:
    for i in range(4):
        yield (np.array(i),)


def _makers(mixed: str) -> dict[str, Callable[[Any], object]]:
    """Everything that takes ``num_parallel_workers``, given a value for it."""

    def gen() -> Dataset:
        return GeneratorDataset(_rows, ["x"], shuffle=False)

    return {
        "config": config.set_num_parallel_workers,
        "MindDataset": lambda n: MindDataset(mixed, num_parallel_workers=n),
        "GeneratorDataset": lambda n: GeneratorDataset(_rows, ["x"], num_parallel_workers=n),
        "map": lambda n: gen().map(lambda v: v, num_parallel_workers=n),
        "batch": lambda n: gen().batch(2, num_parallel_workers=n),
        "filter": lambda n: gen().filter(lambda v: True, num_parallel_workers=n),
    }


NAMES = ["config", "MindDataset", "GeneratorDataset", "map", "batch", "filter"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", [0, -1, 1025])
def test_one_worker_rule_everywhere(name: str, bad: int, mixed: str) -> None:
    with pytest.raises(ArgumentError, match=RULE):
        _makers(mixed)[name](bad)


@pytest.mark.parametrize("name", NAMES)
def test_the_rule_does_not_depend_on_the_machine(name: str, mixed: str) -> None:
    """1024 workers are accepted on a 2-core machine (MindSpore caps at the CPU count)."""
    _makers(mixed)[name](1024)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", ["2", 2.0, True])
def test_a_worker_count_of_the_wrong_type_is_a_type_error(
    name: str, bad: object, mixed: str
) -> None:
    with pytest.raises(WrongTypeError, match="Argument num_parallel_workers with value") as info:
        _makers(mixed)[name](bad)
    assert isinstance(info.value, TypeError)


def test_sources_and_ops_read_the_default_when_constructed(mixed: str) -> None:
    """Both at construction: a later set_num_parallel_workers applies to datasets built
    after it, not to those already built."""
    config.set_num_parallel_workers(3)
    source = MindDataset(mixed, shuffle=False)
    mapped = source.map(lambda v: v, input_columns="id")
    config.set_num_parallel_workers(5)
    later = MindDataset(mixed, shuffle=False).map(lambda v: v, input_columns="id")
    assert source._reads_in_flight() == 3  # the source's read-ahead threads
    assert isinstance(mapped, MapDataset) and isinstance(later, MapDataset)
    assert mapped.num_parallel_workers == 3
    assert later.num_parallel_workers == 5
    assert len(list(mapped.create_tuple_iterator(num_epochs=1))) == 40


def test_an_explicit_worker_count_wins_over_the_default() -> None:
    config.set_num_parallel_workers(7)
    assert config.workers_or_default(None) == 7
    assert config.workers_or_default(2) == 2


def test_mindspore_messages() -> None:
    with pytest.raises(WrongTypeError) as info:
        arguments.check_int("1", "num_shards", 1)
    assert str(info.value) == (
        "Argument num_shards with value '1' is not of type [<class 'int'>], "
        "but got <class 'str'>."
    )
    with pytest.raises(ArgumentError) as range_info:
        arguments.check_int(0, "num_shards", 1, 10)
    assert str(range_info.value) == (
        "Input num_shards is not within the required interval of [1, 10]."
    )
    with pytest.raises(ArgumentError, match=r"^Input prefetch_size must be >= 1, got 0\.$"):
        config.set_prefetch_size(0)
    with pytest.raises(ArgumentError, match=r"^sink_size must be an int >= 1, got 0$"):
        arguments.check_int_at_least(0, "sink_size", 1)
    with pytest.raises(ArgumentError, match=r"^sink_size must be an int >= 1, got '1'$"):
        arguments.check_int_at_least("1", "sink_size", 1)
    with pytest.raises(WrongTypeError, match=r"^offset must be an int, got 1\.0 \(float\)$"):
        arguments.require_int(1.0, "offset")
    assert arguments.require_int(np.int64(3), "offset") == 3  # numpy integers count here
    with pytest.raises(WrongTypeError):
        arguments.check_int(np.int64(3), "num_shards")  # ... but not where MindSpore refuses


@pytest.mark.parametrize(
    ("count", "allow_all", "ok"),
    [(-1, True, True), (0, True, False), (5, True, True), (0, False, True), (-1, False, False)],
)
def test_check_count(count: int, allow_all: bool, ok: bool) -> None:
    if ok:
        assert arguments.check_count(count, "count", allow_all) == count
    else:
        with pytest.raises(ArgumentError, match="count must be"):
            arguments.check_count(count, "count", allow_all)


def test_arguments_imports_nothing_of_mrecord_but_errors() -> None:
    """The ground floor: everything may import it, so it may import nothing above it."""
    import ast

    tree = ast.parse(Path(arguments.__file__).read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mrecord")
    }
    assert imported == {"mrecord.errors"}


def test_the_layering_table_puts_arguments_on_the_ground_floor() -> None:
    """docs/ARCHITECTURE.md's row for ``arguments`` names ``errors`` only, and every package
    that may import ``errors`` may import ``arguments`` too."""
    import re

    doc = (Path(__file__).resolve().parents[2] / "docs" / "ARCHITECTURE.md").read_text()
    match = re.search(r"<!-- layering-table: start -->(.*?)<!-- layering-table: end -->", doc, re.S)
    assert match
    rows: dict[str, set[str]] = {}
    for line in match.group(1).strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0].strip("`")] = set(re.findall(r"`([^`]+)`", cells[1]))
    assert rows["arguments"] == {"errors"}
    above = {name: allowed for name, allowed in rows.items() if name != "arguments"}
    assert [n for n, allowed in above.items() if "errors" in allowed - {"arguments"}] == [
        n for n, allowed in above.items() if {"errors", "arguments"} <= allowed
    ]
