"""A ShardFile subclass that serves bytes other than a local file's (``mrecord.remote``'s
range reads are one): it has no file status, no verify-ahead thread and a private verified
record, and reads and checks chunks under every policy like a local file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mrecord import FileWriter
from mrecord.errors import ChecksumError
from mrecord.storage.shard import ShardFile


class _InMemoryShard(ShardFile):
    """The file's bytes, read once into memory: no map, no descriptor, no ``stat``."""

    def _open_bytes(self) -> tuple[int, Any]:
        data = self.path.read_bytes()
        return len(data), _Bytes(data)


class _Bytes(bytes):
    def close(self) -> None:
        """What ShardFile calls on its bytes when it is closed."""


def _write(path: Path) -> None:
    with FileWriter(path) as writer:
        writer.add_schema({"id": {"type": "int64"}, "name": {"type": "string"}})
        writer.write_raw_data([{"id": i, "name": f"row {i}"} for i in range(10)])


@pytest.mark.parametrize("verify", ["once", "always", "never"])
def test_a_shard_of_other_bytes_reads_and_checks(tmp_path: Path, verify: str) -> None:
    path = tmp_path / "d.mrecord"
    _write(path)
    shard = _InMemoryShard(path, verify=verify)
    try:
        fields = shard.meta.schema.fields
        assert shard.fixed_page(0, fields[0]).tolist() == list(range(10))
        head, raw = shard.var_page(0, fields[1])
        names = [
            bytes(raw[head.data_start + a : head.data_start + b])
            for a, b in zip(head.offsets, head.offsets[1:], strict=False)
        ]
        assert names == [f"row {i}".encode() for i in range(10)]
        assert shard.read_fd() is None and shard.map_address() is None
    finally:
        shard.close()


def test_a_damaged_chunk_of_other_bytes_raises(tmp_path: Path) -> None:
    path = tmp_path / "d.mrecord"
    _write(path)
    with ShardFile(path) as local:
        offset = int(local.meta.chunks[0, 0]["offset"])
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    shard = _InMemoryShard(path, verify="once")
    try:
        with pytest.raises(ChecksumError, match="page 0, field 'id'"):
            shard.fixed_page(0, shard.meta.schema.fields[0])
    finally:
        shard.close()
