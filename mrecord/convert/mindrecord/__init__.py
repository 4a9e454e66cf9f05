"""Native reading of MindRecord files written by MindSpore (no MindSpore needed)."""

from __future__ import annotations

from mrecord.convert.mindrecord.header import FieldSpec, MindRecordHeader, PageInfo, parse_header
from mrecord.convert.mindrecord.reader import MindRecordDataset, MindRecordShard

__all__ = [
    "FieldSpec",
    "MindRecordDataset",
    "MindRecordHeader",
    "MindRecordShard",
    "PageInfo",
    "parse_header",
]
