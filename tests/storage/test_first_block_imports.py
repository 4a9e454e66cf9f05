"""The first block a reader reads imports nothing (issue 23: a cold epoch's first rows).

numpy 2.4's ``numpy.unique`` imports ``numpy.ma`` on its first call: 40 ms of CPU with
the GIL held (more with a cold page cache) inside the first ``read_rows``, while the
reading threads of the first blocks wait for it. The reader's paths use
:func:`mrecord.format.ids.sorted_unique`, which must agree with ``numpy.unique``; the
block shuffle's order (built before its first block) asks ``numpy.unique`` for indices
too, which skips the import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mrecord import FileWriter
from mrecord.format.ids import sorted_unique


@given(
    hnp.arrays(
        dtype=st.sampled_from([np.int64, np.int32, np.uint64, np.intp]),
        shape=st.integers(0, 200),
        elements=st.integers(0, 40),
    )
)
def test_sorted_unique_is_numpy_unique(values: np.ndarray) -> None:
    got = sorted_unique(values)
    want = np.unique(values)
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()


def test_reading_rows_in_every_mode_imports_no_module(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    with FileWriter(path, shard_num=2) as writer:
        writer.add_schema({"label": {"type": "int64"}, "blob": {"type": "bytes"}})
        writer.set_page_size(1 << 16)
        writer.write_raw_data(
            [{"label": i % 7, "blob": bytes([i % 256]) * 20_000} for i in range(120)]
        )
    script = textwrap.dedent(
        f"""
        import sys
        from mrecord import MindDataset, Shuffle
        datasets = [
            MindDataset({str(path)!r}, shuffle=shuffle, num_parallel_workers=2)
            for shuffle in (Shuffle.GLOBAL, Shuffle.PARTIAL, Shuffle.FILES, Shuffle.BLOCK, False)
        ]
        iterators = [d.create_tuple_iterator(num_epochs=1, output_numpy=True) for d in datasets]
        before = set(sys.modules)
        rows = sum(1 for it in iterators for _ in it)
        assert rows == 5 * 120, rows
        print(sorted(set(sys.modules) - before))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"modules imported while reading: {done.stdout}"
