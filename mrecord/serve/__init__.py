"""``mrecord serve``: datasets over HTTP for people (a web page) and programs (RemoteDataset).

::

    mrecord serve train.mrecord0 val=/data/val.mrecord0     # http://127.0.0.1:8750/

    ds = mrecord.RemoteDataset("http://127.0.0.1:8750", "train", shuffle=Shuffle.GLOBAL,
                               num_shards=8, shard_id=rank)

Modules: :mod:`~mrecord.serve.registry` (the named datasets), :mod:`~mrecord.serve.answers`
(limits, error codes, checking a block request), :mod:`~mrecord.serve.app` (the ASGI app),
:mod:`~mrecord.serve.server` (running it with uvicorn), :mod:`~mrecord.serve.wire` (the
binary block format), :mod:`~mrecord.serve.remote` (``RemoteDataset``), and the same-host
transport: :mod:`~mrecord.serve.local_protocol`, :mod:`~mrecord.serve.local_server`,
:mod:`~mrecord.serve.local_client` (blocks in the reader's shared memory, bytes values as
places in shard files the reader maps itself). Needs the extra:
``pip install 'mrecord[serve]'``. Nothing under ``format``, ``reader``, ``writer`` or
``pipeline`` imports this package.
"""

from __future__ import annotations
