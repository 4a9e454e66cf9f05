"""The commit transaction (``mrecord.storage.transaction``) as any writer drives it.

A parallel converter writes each shard with a ``ShardWriter`` into the shard's partial
name and commits them all with one ``Transaction``: these tests do exactly that, and check
what a failure before the commit point leaves (nothing, the lock released) and the
``FileWriter`` state machine built on it.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from mrecord import DatasetReader, FileWriter, MindPage, verify_dataset
from mrecord.errors import DatasetExistsError, DatasetLockedError, WriterStateError
from mrecord.format.metadata import ShardMetadata
from mrecord.format.schema import parse_schema
from mrecord.storage import transaction as txn_mod
from mrecord.storage.naming import partial_path, shard_file_names
from mrecord.storage.transaction import StagedShard, Transaction, TransactionState
from mrecord.writer.file_writer import WriterState
from mrecord.writer.shard_writer import ShardWriter

SCHEMA = parse_schema({"id": {"type": "int64"}, "label": {"type": "int32"}})


def _template(dataset_id: str, name: str, files: list[Path], i: int) -> ShardMetadata:
    return ShardMetadata(
        dataset_id=dataset_id,
        dataset_name=name,
        generation=1,
        shard_index=i,
        shard_names=tuple(f.name for f in files),
        schema=SCHEMA,
        desc=None,
        index_fields=("label",),
        page_size=1024,
        num_rows=0,
        next_shard=0,
        page_rows=np.zeros(0, dtype="<u4"),
        chunks=np.zeros(0),
    )


def _stage(files: list[Path], rows_per_shard: int, dataset_id: str) -> list[StagedShard]:
    """Each shard written on its own (as a converter's workers would), then finished."""
    staged = []
    for i, final in enumerate(files):
        shard = ShardWriter(partial_path(final), SCHEMA, 1024, 3)
        ids = np.arange(i * rows_per_shard, (i + 1) * rows_per_shard, dtype=np.int64)
        shard.add({"id": ids, "label": (ids % 3).astype(np.int32)}, len(ids), ("label",))
        meta = shard.finish(_template(dataset_id, files[0].name, files, i))
        staged.append(StagedShard(final, meta, index_values=shard.new_index_values()))
    return staged


def test_shards_written_separately_commit_as_one_dataset(tmp_path: Path) -> None:
    files = shard_file_names(tmp_path / "conv", 3)
    txn = Transaction.begin(tmp_path, "conv")
    txn.claim(files, overwrite=False)
    dataset_id = uuid.uuid4().hex
    txn.commit(dataset_id, 1, _stage(files, 40, dataset_id))
    assert txn.state is TransactionState.COMMITTED and txn.durable
    with DatasetReader.open(files[0]) as reader:
        ids = np.asarray(reader.read_rows(np.arange(reader.num_rows)).columns["id"])
    assert ids.tolist() == list(range(120))
    assert verify_dataset(files[0]).ok
    page = MindPage(files[1])
    page.set_category_field("label")
    assert page.read_ids_at_page_by_name(2, 0, 200).tolist() == list(range(2, 120, 3))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".mrecord-partial")]
    FileWriter.open_for_append(files[0]).abort()  # the lock was released


def test_a_failure_before_the_journal_leaves_nothing_and_releases_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = shard_file_names(tmp_path / "conv", 2)
    txn = Transaction.begin(tmp_path, "conv")
    txn.claim(files, overwrite=False)
    staged = _stage(files, 10, "0" * 32)

    def full_disk(shard: StagedShard) -> None:
        raise OSError(28, "No space left on device", str(shard.final) + ".db")

    monkeypatch.setattr(txn_mod, "_write_db", full_disk)
    with pytest.raises(OSError, match="nothing of this commit is visible"):
        txn.commit("0" * 32, 1, staged)
    assert txn.state is TransactionState.ABORTED
    assert list(tmp_path.iterdir()) == [tmp_path / "conv.mrecord-lock"]
    Transaction.begin(tmp_path, "conv").abort()  # not locked any more


def test_one_writer_at_a_time_and_no_silent_overwrite(tmp_path: Path) -> None:
    txn = Transaction.begin(tmp_path, "d")
    with pytest.raises(DatasetLockedError):
        Transaction.begin(tmp_path, "d")
    txn.abort()
    assert txn.state is TransactionState.ABORTED
    with FileWriter(tmp_path / "d") as writer:
        writer.add_schema({"x": {"type": "int32"}})
        writer.write_raw_data([{"x": 1}])
    txn = Transaction.begin(tmp_path, "d")
    with pytest.raises(DatasetExistsError):
        txn.claim([tmp_path / "d"], overwrite=False)
    assert txn.state is TransactionState.ABORTED  # a refused claim releases the lock
    with pytest.raises(WriterStateError):
        txn.commit("0" * 32, 1, [])


def test_file_writer_state_is_an_enum_through_its_life(tmp_path: Path) -> None:
    seen: list[WriterState] = []
    writer = FileWriter(tmp_path / "d")
    seen.append(writer.state)
    writer.add_schema({"x": {"type": "int32"}})
    writer.write_raw_data([{"x": 1}])
    seen.append(writer.state)
    writer.commit()
    seen.append(writer.state)
    appender = FileWriter.open_for_append(tmp_path / "d")
    seen.append(appender.state)
    appender.write_raw_data([{"x": 2}])
    appender.abort()
    seen.append(appender.state)
    assert seen == [
        WriterState.OPEN,
        WriterState.WRITING,
        WriterState.COMMITTED,
        WriterState.OPEN,
        WriterState.ABORTED,
    ]
    with DatasetReader.open(tmp_path / "d") as reader:
        assert reader.num_rows == 1


def _write(path: Path, shards: int, rows: int, overwrite: bool = False) -> None:
    with FileWriter(path, shard_num=shards, overwrite=overwrite) as writer:
        writer.add_schema({"id": {"type": "int64"}})
        writer.write_raw_data({"id": np.arange(rows, dtype=np.int64)})


def test_overwriting_with_fewer_shards_removes_the_old_extra_shards(tmp_path: Path) -> None:
    """Found by issue 27's Ray-sink sweep: a dataset of 3 shards overwritten by one of 2
    left data2 and data2.db behind, a stray shard of the old dataset that `mrecord verify`
    of the folder reported as a second dataset and that raised ForeignShardError."""
    _write(tmp_path / "data", 3, 30)
    _write(tmp_path / "data", 2, 10, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith("lock")) == [
        "data0", "data0.db", "data1", "data1.db"
    ]
    with DatasetReader.open(tmp_path / "data0") as reader:
        assert reader.num_rows == 10
    assert verify_dataset(tmp_path / "data0").ok


def test_overwriting_leaves_files_that_were_not_the_old_datasets_shards(tmp_path: Path) -> None:
    """Only shards the replaced dataset named as its own go: a dataset called data2 that
    merely sits in the same folder stays, whole."""
    _write(tmp_path / "data", 2, 20)
    _write(tmp_path / "data2", 1, 5)
    _write(tmp_path / "data", 2, 10, overwrite=True)
    with DatasetReader.open(tmp_path / "data2") as other:
        assert other.num_rows == 5
    with DatasetReader.open(tmp_path / "data0") as reader:
        assert reader.num_rows == 10
