"""``ValueSpill``: index values appended in parts and read back by slices are the values
appended, in order, whatever falls in a block on disk and what is still in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrecord.format.schema import Field
from mrecord.storage import value_spill
from mrecord.storage.value_spill import ValueSpill

_FIELDS = {
    "int64": (Field("v", "int64"), st.integers(-(2**63), 2**63 - 1)),
    "int32": (Field("v", "int32"), st.integers(-(2**31), 2**31 - 1)),
    "float64": (Field("v", "float64"), st.floats(allow_nan=False)),
    "string": (Field("v", "string"), st.text(st.characters(exclude_categories=["Cs"]))),
    "bytes": (Field("v", "bytes"), st.binary()),
}


def _column(field: Field, values: list[Any]) -> np.ndarray | list[Any]:
    return np.array(values, dtype=field.dtype) if field.is_scalar else values


@pytest.mark.parametrize("kind", sorted(_FIELDS))
@given(data=st.data())
def test_slices_read_back_the_values_appended(
    kind: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    field, values = _FIELDS[kind]
    parts = data.draw(st.lists(st.lists(values, max_size=12), max_size=8), label="parts")
    spill = ValueSpill(tmp_path_factory.mktemp("spill"), field)
    original = value_spill.SPILL_ROWS
    value_spill.SPILL_ROWS = data.draw(st.integers(1, 9), label="block rows")
    try:
        for part in parts:
            spill.append(_column(field, part))
        expected = [v for part in parts for v in part]
        assert len(spill) == len(expected)
        start = data.draw(st.integers(0, len(expected)), label="start")
        stop = data.draw(st.integers(start, len(expected)), label="stop")
        got = spill[start:stop]
        if field.is_scalar:
            assert isinstance(got, np.ndarray) and got.dtype == field.dtype
        assert list(got) == expected[start:stop]
        assert list(spill[0 : len(spill)]) == expected  # the whole, across blocks
    finally:
        value_spill.SPILL_ROWS = original
        spill.close()
    assert len(spill) == 0


def test_values_past_a_block_go_to_an_unnamed_file_of_the_folder(tmp_path: Path) -> None:
    spill = ValueSpill(tmp_path, Field("name", "string"))
    names = [f"image_{i:07d}.jpg" for i in range(3 * value_spill.SPILL_ROWS + 5)]
    for lo in range(0, len(names), 1000):
        spill.append(names[lo : lo + 1000])
    assert spill._file is not None, "three blocks' worth of rows stayed in memory"
    assert list(tmp_path.iterdir()) == []  # unnamed: nothing to clean up after a kill
    assert (
        spill[value_spill.SPILL_ROWS - 2 : value_spill.SPILL_ROWS + 2]
        == names[value_spill.SPILL_ROWS - 2 : value_spill.SPILL_ROWS + 2]
    )
    assert spill[len(names) - 7 :] == names[-7:]  # the last block and the values held
    spill.close()


def test_numbers_are_copied_so_the_callers_batch_is_not_kept(tmp_path: Path) -> None:
    spill = ValueSpill(tmp_path, Field("label", "int32"))
    batch = np.arange(100_000, dtype=np.int32)
    spill.append(batch[:10])
    batch[:10] = -1  # the caller reuses its buffer
    assert list(spill[0:10]) == list(range(10))


def test_one_large_append_goes_to_the_file_in_blocks(tmp_path: Path) -> None:
    """A million names in one call were packed as one msgpack array (and read back whole
    for each slice of the ``.db`` insert)."""
    spill = ValueSpill(tmp_path, Field("name", "string"))
    names = [f"n{i:08d}" for i in range(5 * value_spill.SPILL_ROWS + 3)]
    spill.append(names)
    assert [b.rows for b in spill._blocks] == [value_spill.SPILL_ROWS] * 5 + [3]
    assert (
        spill[2 * value_spill.SPILL_ROWS - 1 : 2 * value_spill.SPILL_ROWS + 1]
        == names[2 * value_spill.SPILL_ROWS - 1 : 2 * value_spill.SPILL_ROWS + 1]
    )
    spill.close()


def test_the_spills_of_a_folder_share_one_file_until_the_last_lets_go(tmp_path: Path) -> None:
    """One descriptor however many shards and fields (1,000 shards of two index fields
    held 2,000 and failed with EMFILE under a soft limit of 1,024); a spill collected
    without ``close`` lets go of it too."""
    import gc

    spills = [ValueSpill(tmp_path, Field("v", "int64")) for _ in range(3)]
    for k, spill in enumerate(spills):
        spill.append(np.arange(k * 10, k * 10 + 10, dtype=np.int64))
        spill.flush()
    assert len({id(s._file) for s in spills}) == 1
    assert [list(s[0:10]) for s in spills] == [list(range(k * 10, k * 10 + 10)) for k in range(3)]
    spills[0].close()
    assert tmp_path in value_spill._files  # the others still use it
    del spills[1]
    gc.collect()
    spills[-1].close()
    assert tmp_path not in value_spill._files
