"""A served dataset named where a file would be: what the torch datasets and Ray read.

``mrecord.torch.StreamingDataset`` / ``MapDataset`` and ``mrecord.ray.read_mrecord``
take files, and also a dataset of ``mrecord serve``:

- a :class:`~mrecord.serve.client.dataset.RemoteDataset` (its servers, token and
  options are reused; its own order arguments are not: the trainer's dataset orders),
- or its URL on the server, ``http(s)://HOST:PORT/api/datasets/NAME`` (the address
  ``GET`` answers with its description), or a list of them for several servers of the
  same files. ``https://host/data/train.mrecord0`` stays a *file* read over fsspec
  (docs/REMOTE.md); only the ``/api/datasets/NAME`` path names a served dataset, so
  nothing that worked before changes meaning. With a URL, ``storage_options`` are
  ``RemoteDataset``'s connection arguments (``token``, ``cafile``, ``timeout``,
  ``retries``, ``transport``); the token defaults to ``$MRECORD_SERVE_TOKEN``.

:class:`ServedSpec` is picklable (URLs and options only), so a DataLoader worker or a
Ray task opens its own connections; :func:`read_rows` cuts a read into requests the
server takes (``max_block_rows`` / ``max_block_bytes``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mrecord.block import Block, BytesArray
from mrecord.errors import ArgumentError

if TYPE_CHECKING:
    from mrecord.serve.client.dataset import RemoteDataset

__all__ = ["OPTIONS", "ServedSpec", "read_rows", "served_spec"]

OPTIONS = ("token", "cafile", "timeout", "retries", "transport")
"""What ``storage_options`` may hold for a served dataset's URL."""

_URL = re.compile(r"^(https?://[^/?#]+(?:/[^?#]*?)?)/api/datasets/([^/?#]+)/?$")


@dataclass(frozen=True)
class ServedSpec:
    """How to open one served dataset, in any process (module docstring)."""

    urls: tuple[str, ...]
    """The servers of the same files (the first is used, the next on failure)."""
    dataset: str
    token: str | None = None
    cafile: str | None = None
    timeout: float = 60.0
    retries: int = 4
    transport: str = "auto"

    @property
    def where(self) -> str:
        """The dataset's URL on its first server (for messages and fingerprints)."""
        return f"{self.urls[0]}/api/datasets/{self.dataset}"

    def open(self, columns: Sequence[str] | None = None) -> RemoteDataset:
        """A ``RemoteDataset`` of this dataset in file order (the caller orders)."""
        from mrecord.serve.client.dataset import RemoteDataset  # it imports this module

        return RemoteDataset(
            list(self.urls),
            self.dataset,
            columns_list=None if columns is None else list(columns),
            shuffle=False,
            token=self.token,
            timeout=self.timeout,
            retries=self.retries,
            transport=self.transport,
            cafile=self.cafile,
        )


def served_spec(value: object, options: Mapping[str, Any] | None = None) -> ServedSpec | None:
    """``value`` as a served dataset (a ``RemoteDataset``, its URL, a list of URLs), or
    None when it names files. ``options``: connection arguments for URLs (``OPTIONS``)."""
    from mrecord.serve.client.dataset import RemoteDataset

    if isinstance(value, RemoteDataset):
        return value.served
    urls = [value] if isinstance(value, str) else None
    is_list = isinstance(value, Sequence) and not isinstance(value, str) and bool(value)
    if is_list and all(isinstance(v, str) for v in value):  # type: ignore[attr-defined]
        urls = list(value)  # type: ignore[call-overload]
    if urls is None:
        return None
    matches = [_URL.match(u) for u in urls]
    if not any(matches):
        return None
    bad = [u for u, m in zip(urls, matches, strict=True) if m is None]
    names = {m.group(2) for m in matches if m is not None}
    if bad or len(names) != 1:
        raise ArgumentError(
            f"a list of served datasets must name one dataset on several servers "
            f"(http://HOST:PORT/api/datasets/NAME each), got {urls!r}"
        )
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise ArgumentError(
            f"storage_options for a served dataset may hold {list(OPTIONS)!r}, got {unknown!r}"
        )
    opts.setdefault("token", os.environ.get("MRECORD_SERVE_TOKEN") or None)
    return ServedSpec(
        urls=tuple(m.group(1) for m in matches if m is not None),
        dataset=names.pop(),
        **opts,
    )


def read_rows(
    ds: RemoteDataset,
    ids: np.ndarray,
    columns: Sequence[str],
    *,
    bytes_as_arrays: bool = False,
    sweep: bool = False,
) -> Block:
    """Rows ``ids`` of ``ds`` as ``DatasetReader.read_rows`` gives them, in as many
    requests as the server's limits need. Bytes values come as ``bytes`` unless
    ``bytes_as_arrays`` (then read-only ``uint8`` arrays, as the reader's). ``sweep``:
    a window of ``ds.sweep_rows`` rows, asked for in ascending order
    (``RemoteDataset.read_rows(sweep=True)``)."""
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    step = max(1, ds.block_rows)
    if sweep:
        block = ds.read_rows(ids, columns, sweep=True)
    else:
        starts = range(0, len(ids), step) if len(ids) else range(1)
        block = Block.concat([ds.read_rows(ids[i : i + step], columns) for i in starts])
    if not bytes_as_arrays:
        for name, values in block.columns.items():
            if _holds_byte_arrays(values):
                block.columns[name] = [bytes(v) for v in values]  # as the reader's
    return block


def _holds_byte_arrays(values: Any) -> bool:
    # The wire gives a bytes column as a list (or object array) of BytesArray views.
    if isinstance(values, np.ndarray) and values.dtype != object:
        return False
    return len(values) > 0 and any(isinstance(v, BytesArray) for v in values)
