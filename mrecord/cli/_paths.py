"""The dataset argument of every command that opens one: a shard, a folder, or a URL."""

from __future__ import annotations

from typing import Any

import click

from mrecord.errors import ArgumentError

__all__ = ["DatasetArg"]


class DatasetArg(click.ParamType):  # type: ignore[type-arg]
    """A dataset to open, resolved before the command runs.

    - a shard file (any one: its siblings are found);
    - a missing name whose shards exist (``data.mrecord`` for ``data.mrecord0..3``): a
      :class:`~mrecord.errors.DatasetNotFoundError` saying "did you mean 'data.mrecord0'?";
    - a folder holding exactly one dataset's shards: its first shard;
    - a URL (``s3://``, ``https://``; ``mrecord[remote]``): passed on as is, or, with
      ``fetch=True`` (commands that need local files), fetched into the cache first;
      ``remote=False`` refuses URLs (commands that write).
    """

    name = "dataset"

    def __init__(self, *, remote: bool = True, fetch: bool = False) -> None:
        self.remote = remote
        self.fetch = fetch

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """Resolve ``value``; library errors (exit 3) say what was wrong."""
        from mrecord.remote.urls import is_url
        from mrecord.storage.locate import locate_dataset

        text = str(value)
        if is_url(text):
            if not self.remote:
                raise ArgumentError(f"{text!r} is a URL; this command works on local files only")
            if self.fetch:
                from mrecord.remote.open import fetch_dataset

                return str(fetch_dataset(text))
            return text
        return str(locate_dataset(text))
