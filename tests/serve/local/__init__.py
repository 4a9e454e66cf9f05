"""Tests of the same-host transport of ``mrecord serve`` (Unix socket, shared memory)."""
