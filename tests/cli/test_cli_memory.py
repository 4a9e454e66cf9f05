"""The commands that pass over a whole dataset (``mrecord stats``, ``cat``, ``bench``) read
it a bounded number of bytes at a time: over 200 MB of 100 KB rows in a memory group
smaller than the dataset they finish, right."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mrecord import DatasetReader
from mrecord.cli.stats import BLOCK_BYTES, iter_dataset_blocks
from tests.convert.test_convert_memory import BLOB, ROWS, _write
from tests.memory_groups import need_memory_groups, run_in_memory_group

_STATS = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from mrecord.cli.main import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main(["stats", sys.argv[1], "--json", "--quiet"])
        except SystemExit as exc:
            assert not exc.code, exc.code
    stats = json.loads(out.getvalue())
    print(json.dumps({"rows": stats["rows"], "blob": stats["fields"]["blob"]["count"]}))
    """
)


def test_stats_over_large_rows_within_a_memory_group_smaller_than_the_data(
    tmp_path: Path,
) -> None:
    """``mrecord stats`` over 2,000 rows of 100 KB (200 MB) in a 160 MB memory group.
    It read 4,096 rows a call whatever their size (the bench's 2.4 GB of images: 410 MB
    a call, OOM-killed in a 200 MB group)."""
    need_memory_groups("mrecord stats in 160 MB")
    path = tmp_path / "big.mrecord"
    _write(path)
    result = run_in_memory_group(160 << 20, _STATS, str(path))
    assert result == {"rows": ROWS, "blob": ROWS}


def test_a_whole_dataset_pass_reads_at_most_block_bytes_a_call(tmp_path: Path) -> None:
    """Every row once, in order; large rows ``BLOCK_BYTES`` a call, not ``chunk``."""
    path = tmp_path / "big.mrecord"
    _write(path)
    with DatasetReader.open(path) as reader:
        assert reader.mean_row_bytes == pytest.approx(BLOB + 8, rel=0.01)
        sizes: list[int] = []
        ids: list[int] = []
        for block in iter_dataset_blocks(reader, 4096, start=5, stop=1500):
            sizes.append(len(block))
            ids.extend(int(i) for i in block.columns["id"])
    assert ids == list(range(5, 1500))
    assert max(sizes) == BLOCK_BYTES // reader.mean_row_bytes


_BENCH = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from mrecord.cli.main import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main(["bench", sys.argv[1], "--json", "--cold", "--max-rows", "1000"])
        except SystemExit as exc:
            assert not exc.code, exc.code
    report = json.loads(out.getvalue())
    rows = [r["rows"] for r in report["results"]]
    print(json.dumps({"rows": rows, "batch_size": report["batch_size"]}))
    """
)


def test_bench_over_large_rows_within_a_memory_group(tmp_path: Path) -> None:
    """``mrecord bench --cold`` over 200 MB of 100 KB rows in a 160 MB memory group: its
    default batches hold at most a 32nd of the memory budget, as ``MindDataset``'s
    blocks do. Batches of 256 such rows (25 MB, four at a time) got it OOM-killed over
    2.4 GB of images in a 200 MB group; a batch size given on the command line stands."""
    need_memory_groups("mrecord bench in 160 MB")
    path = tmp_path / "big.mrecord"
    _write(path)
    result = run_in_memory_group(160 << 20, _BENCH, str(path))
    assert result["rows"] == [1000, 1000]
    assert 1 <= result["batch_size"] <= (160 << 20) // 32 // BLOB
