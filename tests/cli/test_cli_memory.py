"""The commands that pass over a whole dataset (``mrecord stats``, ``cat``, ``bench``) read
it a bounded number of bytes at a time: over 200 MB of 100 KB rows in a memory group
smaller than the dataset they finish, right."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mrecord import DatasetReader
from mrecord.reader.passes import BLOCK_BYTES, iter_dataset_blocks
from tests.convert.test_convert_memory import BLOB, ROWS, _write
from tests.memory_groups import need_memory_groups, run_in_memory_group
from tests.tracing import run_child

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


_ARROW_RESIDENT = textwrap.dedent(
    """
    import io, json, os, sys
    import numpy as np
    import pyarrow
    from mrecord.block import Block
    from mrecord.cli.cat import write_arrow
    from mrecord.format.schema import Field
    from tests.tracing import resident_anonymous

    class Sink(io.RawIOBase):  # counts what is written, keeps none of it
        written = 0
        def writable(self):
            return True
        def write(self, data):
            Sink.written += len(data)
            return len(data)

    fmt, kind, value_bytes, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    source = os.urandom(value_bytes * rows)
    before = resident_anonymous()

    def blocks():
        for _ in range(40):
            # fresh value objects each block, as a reader hands them out, held by the
            # consumer alone
            yield Block({"value": values(), "id": np.arange(rows, dtype=np.int64)})

    def values():
        cut = [source[i * value_bytes : (i + 1) * value_bytes] for i in range(rows)]
        return [v.hex()[:value_bytes] for v in cut] if kind == "string" else cut

    fields = [Field("value", kind), Field("id", "int64")]
    count = write_arrow(blocks(), fields, fmt, Sink())
    grown = resident_anonymous() - before
    pool_peak = pyarrow.default_memory_pool().max_memory()
    print(json.dumps({"rows": count, "written": Sink.written, "grown": grown, "pool": pool_peak}))
    """
)


@pytest.mark.parametrize("kind", ["bytes", "string"])
def test_an_arrow_export_of_large_values_holds_about_a_block(kind: str) -> None:
    """``mrecord cat --format arrow`` over 100 KB values: 8 MB blocks (83 rows,
    ``BLOCK_BYTES``) exported one after another keep the process's resident memory within
    a few blocks of where it started. Arrow's builder (``pa.array`` of a list of values)
    grew its buffer by doubling and its pool kept what it freed: the process grew by
    72 MB (42-51 MB now, most of it glibc's heap around the blocks' 8 MB objects), and an
    export of the bench's 2.4 GB of images in a 150 MB memory group took 151 s (8 s
    unconstrained; 6 s now), the group reclaiming its own code pages throughout. The
    values are now joined into one buffer the Arrow array wraps."""
    result = _export_large_values("arrow", kind)
    assert result["pool"] < 1 << 20, result  # the values never pass through Arrow's pool
    assert result["grown"] < 60 << 20, result


def test_a_parquet_export_of_large_values_gives_back_what_encoding_freed() -> None:
    """``mrecord cat --format parquet`` over 100 KB values: Arrow's pool kept what each
    row group's encoding freed (the pool peaks near 30 MB for an 8 MB block) and the
    process grew by 94 MB (33 MB now); an export of the bench's 2.4 GB of images was OOM-killed in
    a 150 MB memory group. The pool is given back after each block of bytes or strings:
    9.4 s there."""
    result = _export_large_values("parquet", "bytes")
    assert result["grown"] < 60 << 20, result


def _export_large_values(fmt: str, kind: str) -> dict[str, int]:
    """Run ``_ARROW_RESIDENT`` in a fresh interpreter: 40 blocks of 83 values of 100 KB."""
    result: dict[str, int] = run_child(_ARROW_RESIDENT, fmt, kind, "100000", "83")
    assert result["rows"] == 40 * 83
    assert result["written"] > 40 * 83 * 100_000
    return result


_EXPORT_IMPORTS = textwrap.dedent(
    """
    import io, json, sys
    import numpy as np
    from mrecord.block import Block
    from mrecord.cli.cat import write_arrow
    from mrecord.format.schema import Field

    fields = [
        Field("id", "int64"),
        Field("vector", "float32", [4]),
        Field("points", "float32", [-1, 3]),
        Field("flag", "bool"),
        Field("name", "string"),
    ]
    block = Block({
        "id": np.arange(3, dtype=np.int64),
        "vector": np.ones((3, 4), dtype=np.float32),
        "points": [np.zeros((n, 3), dtype=np.float32) for n in (1, 0, 2)],
        "flag": np.array([True, False, True]),
        "name": ["a", "b", "c"],
    })
    for fmt in ("arrow", "parquet"):
        write_arrow(iter([block]), fields, fmt, io.BytesIO())
    print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "pandas")[:3]))
    """
)


def test_an_export_does_not_load_pandas() -> None:
    """``mrecord cat --format arrow|parquet`` and ``Block.to_arrow`` hand numpy arrays to
    Arrow as buffers: ``pa.array(ndarray)`` imports pandas where it is installed (as
    ``datasets``, beside pyarrow in ``mrecord[arrow]``, installs it), 389 modules and
    31 MB of resident memory, a fifth of a 150 MB memory group, for nothing."""
    pytest.importorskip("pandas")
    assert run_child(_EXPORT_IMPORTS) == []
