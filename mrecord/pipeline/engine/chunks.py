"""Chunks of exactly :data:`CHUNK_ROWS` rows: the unit ``map`` and ``filter`` send to workers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from mrecord.block import Block
from mrecord.pipeline.engine.columns import split_block

__all__ = ["CHUNK_ROWS", "rechunk"]

CHUNK_ROWS = 64


def rechunk(blocks: Iterable[Block], rows: int) -> Iterator[Block]:
    """The rows of ``blocks`` in chunks of exactly ``rows`` rows (the last may be shorter).

    Chunks do not follow the input's block boundaries, so chunk ``k`` always holds rows
    ``k * rows`` to ``(k + 1) * rows`` of the stream: a later ``batch`` of ``rows`` (or a
    multiple) then takes whole chunks, without copying the map's outputs again.
    """
    pending: list[Block] = []
    count = 0
    for block in blocks:
        if not len(block):
            continue
        if not pending and len(block) < rows:
            pending, count = [block], len(block)
            continue
        if pending:
            need = rows - count
            if len(block) < need:
                pending.append(block)
                count += len(block)
                continue
            yield Block.concat([*pending, block.slice(0, need)])
            block = block.slice(need, len(block))
            pending, count = [], 0
        full = len(block) - len(block) % rows
        if full:
            yield from split_block(block.slice(0, full), rows)
        if full < len(block):
            pending, count = [block.slice(full, len(block))], len(block) - full
    if pending:
        yield Block.concat(pending)
