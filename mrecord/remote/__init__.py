"""Reading datasets from object stores and web servers (``pip install 'mrecord[remote]'``).

``DatasetReader.open`` and ``MindDataset`` take URLs (``s3://``, ``gs://``,
``https://``, anything fsspec knows). Shards and ``.db`` files are fetched into a
local cache (:class:`RemoteCache`: size-bounded, LRU, shared safely by processes),
checked against their checksums, then memory-mapped as local files. See docs/REMOTE.md.
"""

from __future__ import annotations

from mrecord.remote.cache import RemoteCache
from mrecord.remote.open import fetch_dataset, open_remote_shards
from mrecord.remote.urls import is_remote, is_url

__all__ = ["RemoteCache", "fetch_dataset", "is_remote", "is_url", "open_remote_shards"]
