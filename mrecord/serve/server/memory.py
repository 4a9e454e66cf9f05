"""The memory a server's blocks in flight may hold (issue 28).

A block request costs the server about twice its bytes while it is answered: the values
read (one buffer per cold block) and their encoded copy, held until the last byte has
been sent. With ``read_threads`` reads at once and blocks of 25 MB (256 images of 100
KB), a server started in a 300 MB memory group was OOM-killed (anonymous memory 295-343
MB, docs/SERVE.md). :class:`BlockMemory` admits a block only while the blocks in flight
stay within half of the memory budget the server started with (the storage layer's
``memory_budget``, as every read-ahead window is cut from it); a block larger than that
alone is admitted alone. Without a known budget nothing waits.

Read-ahead hints fill the page cache, which the server's memory group is charged for: in
a group that small the hinted rows and the blocks being read reclaim each other's pages,
and the reads got slower, not faster (a server in a 300 MB group, one client over
loopback, hints taken / not sent, alternating: 2,027-2,623 against 2,897-3,817 rows/s,
the group's limit hit 75,000-90,000 times against a few hundred; docs/SERVE.md).
:func:`takes_hints` says no under :data:`HINTS_MIN_BUDGET`; such a server answers hints
and does not take them.
"""

from __future__ import annotations

import anyio

__all__ = ["HINTS_MIN_BUDGET", "BlockMemory", "takes_hints"]

HINTS_MIN_BUDGET = 1 << 30
"""The memory budget under which a server does not take read-ahead hints."""

_MIN_CAPACITY = 32 << 20
"""The least a server admits at once when it knows a budget (a few blocks of rows)."""


def takes_hints(budget: int | None) -> bool:
    """Whether a server started with ``budget`` bytes to fill (None: unknown) takes
    read-ahead hints (see the module docstring)."""
    return budget is None or budget >= HINTS_MIN_BUDGET


class BlockMemory:
    """Bytes held by blocks being read and sent, bounded by ``capacity`` (None: no bound)."""

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.used = 0
        self._cond: anyio.Condition | None = None

    @classmethod
    def for_budget(cls, budget: int | None) -> BlockMemory:
        """Half of ``budget`` (bytes the server may still fill; None: unknown)."""
        return cls(None if budget is None else max(budget // 2, _MIN_CAPACITY))

    async def acquire(self, nbytes: int) -> int:
        """Wait until ``nbytes`` more fit (or nothing else is held); the bytes now held,
        to give to :meth:`release` once the block's answer is sent."""
        if self.capacity is None or nbytes <= 0:
            return 0
        held = min(nbytes, self.capacity)
        if self._cond is None:
            self._cond = anyio.Condition()
        async with self._cond:
            while self.used and self.used + held > self.capacity:
                await self._cond.wait()
            self.used += held
        return held

    async def release(self, held: int) -> None:
        """Give back what :meth:`acquire` returned."""
        if not held or self._cond is None:
            return
        async with self._cond:
            self.used -= held
            self._cond.notify_all()
