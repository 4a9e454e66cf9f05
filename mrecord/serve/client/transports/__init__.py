"""How a ``RemoteDataset``'s blocks travel: :mod:`~.base` (the interface), :mod:`~.http`,
:mod:`~.local` (the same-host socket, shared memory) and :mod:`~.auto` (the policy: busy,
retries, fallback), one module per transport, as httpx's ``_transports/``."""

from __future__ import annotations
