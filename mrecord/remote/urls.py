"""Telling URLs (``s3://bucket/x``, ``https://host/x``) from local paths, without fsspec.

``pathlib.Path("s3://bucket/x")`` silently becomes ``s3:/bucket/x``; every path
the reader is given is checked here first, so a URL never reaches ``Path``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from mrecord.errors import ArgumentError

__all__ = ["is_remote", "is_url", "url_basename", "url_parent"]

# A scheme of two or more characters, so a Windows drive (``C:\\data``) is never a URL.
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+://")
# What pathlib makes of one: Path("s3://bucket/x") is "s3:/bucket/x".
_MANGLED = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+:/[^/]")


def is_url(value: object) -> bool:
    """True when ``value`` is a string that starts with ``scheme://``."""
    return isinstance(value, str) and _URL.match(value) is not None


def is_remote(dataset_files: object) -> bool:
    """True when ``dataset_files`` (one path or a list) names any URL.

    A ``Path`` made from a URL lost a slash for good: ArgumentError says to pass a str.
    """
    if isinstance(dataset_files, os.PathLike):
        text = os.fspath(dataset_files)
        if isinstance(text, str) and _MANGLED.match(text) and not os.path.exists(text):
            raise ArgumentError(
                f"{text!r} looks like a URL that pathlib.Path rewrote (it drops one '/' of "
                "'scheme://'); pass the URL as a str"
            )
        return False
    if isinstance(dataset_files, str):
        return is_url(dataset_files)
    if isinstance(dataset_files, Sequence):
        return any(is_url(p) for p in dataset_files)
    return False


def url_parent(url: str) -> str:
    """The URL of the folder holding ``url`` (``s3://b/d/x`` → ``s3://b/d``)."""
    return url.rstrip("/").rsplit("/", 1)[0]


def url_basename(url: str) -> str:
    """The last part of ``url``'s path, without a query (``s3://b/d/x`` → ``x``)."""
    return url.rstrip("/").rsplit("/", 1)[1].split("?", 1)[0]
