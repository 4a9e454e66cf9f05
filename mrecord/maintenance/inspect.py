"""``dataset_info``: what a dataset holds, read from metadata only (no page is decoded)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mrecord.format.compression import CODEC_NAMES
from mrecord.reader.dataset_reader import DatasetReader
from mrecord.storage.naming import db_path

__all__ = ["dataset_info"]


def dataset_info(
    dataset_files: str | os.PathLike[str] | list[str | os.PathLike[str]],
) -> dict[str, Any]:
    """Schema, shards, rows, pages, bytes and compression of a dataset, as a JSON-able dict."""
    reader = DatasetReader.open(dataset_files, check_index=False, verify="never")
    try:
        head = reader.shards[0].meta
        files = []
        stored = dict.fromkeys(head.schema.names, 0)
        raw = dict.fromkeys(head.schema.names, 0)
        codecs: dict[str, set[str]] = {name: set() for name in head.schema.names}
        for shard in reader.shards:
            meta = shard.meta
            db = db_path(shard.path)
            files.append(
                {
                    "file": str(shard.path),
                    "rows": meta.num_rows,
                    "pages": meta.num_pages,
                    "bytes": shard.size,
                    "db_bytes": db.stat().st_size if db.exists() else None,
                }
            )
            for col, name in enumerate(meta.schema.names):
                chunks: Any = meta.chunks[:, col]
                if meta.num_pages:
                    stored[name] += int(chunks["length"].sum())
                    raw[name] += meta.raw_bytes(col)
                    codecs[name].update(CODEC_NAMES[int(c)] for c in np.unique(chunks["codec"]))
        fields = []
        for fld in head.schema.fields:
            fields.append(
                {
                    "name": fld.name,
                    **fld.to_dict(),
                    "compression": fld.compression,
                    "stored_bytes": stored[fld.name],
                    "raw_bytes": raw[fld.name],
                    "codecs_used": sorted(codecs[fld.name]),
                }
            )
        return {
            "dataset_id": head.dataset_id,
            "dataset_name": head.dataset_name,
            "generation": head.generation,
            "format_version": ".".join(map(str, head.format_version)),
            "desc": head.desc,
            "rows": reader.num_rows,
            "shards": len(reader.shards),
            "pages": sum(f["pages"] for f in files),
            "bytes": sum(f["bytes"] for f in files),
            "page_size": head.page_size,
            "index_fields": list(head.index_fields),
            "schema": fields,
            "files": files,
        }
    finally:
        reader.close()
