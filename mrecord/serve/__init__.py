"""``mrecord serve``: datasets over HTTP for people (a web page) and programs (RemoteDataset).

::

    mrecord serve train.mrecord0 val=/data/val.mrecord0     # http://127.0.0.1:8750/

    ds = mrecord.RemoteDataset("http://127.0.0.1:8750", "train", shuffle=Shuffle.GLOBAL,
                               num_shards=8, shard_id=rank)

Three parts, each its own package (docs/ARCHITECTURE.md's table keeps them apart):

- :mod:`~mrecord.serve.protocol`: what both sides agree on (error codes, limits, the
  block format, the same-host messages); no web framework, no reader;
- :mod:`~mrecord.serve.server`: the named datasets, the HTTP app (Starlette + uvicorn),
  the same-host socket; it reads with ``reader/`` and never imports ``pipeline/``;
- :mod:`~mrecord.serve.client`: ``RemoteDataset``, a random-access pipeline source over
  a transport (HTTP, same-host shared memory, and the policy between them).

:mod:`~mrecord.serve.buffers` (reusable buffers) serves both sides. The server needs the
extra: ``pip install 'mrecord[serve]'``; the client needs no third-party package beyond
msgpack. Nothing under ``format``, ``reader``, ``writer`` or ``pipeline`` imports this
package.
"""

from __future__ import annotations
