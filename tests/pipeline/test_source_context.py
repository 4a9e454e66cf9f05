"""Sources take their settings from the running pipeline's context, not live from config."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mrecord import FileWriter, GeneratorDataset, MindDataset, config


@pytest.fixture
def small(tmp_path: Path) -> str:
    path = tmp_path / "d.mrecord"
    writer = FileWriter(str(path))
    writer.add_schema({"x": {"type": "int64"}})
    writer.write_raw_data({"x": np.arange(200, dtype=np.int64)})
    writer.commit()
    return str(path)


def _ids(iterator: object) -> list[int]:
    return [int(row[0]) for row in iterator]  # type: ignore[attr-defined]


def test_mind_dataset_uses_the_seed_taken_when_the_iterator_was_made(small: str) -> None:
    config.set_seed(11)
    try:
        expected = _ids(MindDataset(small, shuffle=True).create_tuple_iterator(num_epochs=1))
        ds = MindDataset(small, shuffle=True)
        it = ds.create_tuple_iterator(num_epochs=1)
        config.set_seed(12)  # after the iterator exists: must not change its order
        assert _ids(it) == expected
        assert sorted(expected) == list(range(200)) and expected != list(range(200))
    finally:
        config.reset()


def test_generator_dataset_uses_the_seed_taken_when_the_iterator_was_made() -> None:
    data = list(range(300))
    config.set_seed(5)
    try:
        expected = _ids(
            GeneratorDataset(data, ["x"], shuffle=True).create_tuple_iterator(num_epochs=1)
        )
        ds = GeneratorDataset(data, ["x"], shuffle=True, num_parallel_workers=2)
        it = ds.create_tuple_iterator(num_epochs=1)
        config.set_seed(6)
        assert _ids(it) == expected
        assert sorted(expected) == data and expected != data
    finally:
        config.reset()


def test_a_source_reads_the_seed_from_the_context_it_is_given(small: str) -> None:
    """The source contract: ``_iter_blocks(ctx, epoch)`` orders rows by ``ctx.seed``."""
    from mrecord.pipeline.engine.context import ExecContext
    from mrecord.pipeline.engine.graph import build_graph

    def order(ds: MindDataset, seed: int) -> list[int]:
        ctx = ExecContext(build_graph(ds))
        ctx.seed = seed
        try:
            return [int(v) for b in ds._iter_blocks(ctx, 0) for v in b.columns["x"]]
        finally:
            ctx.close()

    ds = MindDataset(small, shuffle=True)
    config.set_seed(3)
    try:
        with_config_seed = order(ds, 3)
        assert order(ds, 4) != with_config_seed  # the context's seed, not config's, decides
        config.set_seed(4)
        assert order(ds, 3) == with_config_seed
    finally:
        config.reset()
