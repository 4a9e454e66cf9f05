"""Tests of mrecord.storage: names, the commit transaction, shard writes, read-ahead, checksums."""
