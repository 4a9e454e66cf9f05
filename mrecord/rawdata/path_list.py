"""Many file paths in little memory: each folder's text once, each name's bytes in one
buffer.

A ``str`` per path (and its list slot) is ~100 bytes for a path such as
``/data/imagenet/train/n01440764/n01440764_10026.JPEG``: a million-file conversion's
listing held 96 MB of path texts (docs/CONVERT.md, "A million files"), and ten million
files would need a gigabyte before the first was read. :class:`PathList` keeps a path as
its name's UTF-8 bytes and an 8-byte end offset, with the folder's text kept once for
all its files; ``paths[i]`` builds the ``str`` when it is asked for.

Names are encoded with ``surrogateescape``, the way ``os.walk`` decoded them, so a name
that is not valid UTF-8 comes back as the same ``str`` (and opens the same file).
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from mrecord.errors import RowIndexError

__all__ = ["PathList"]


class PathList(Sequence[str]):
    """File paths added folder by folder (:meth:`extend`), read back as ``str``."""

    def __init__(self) -> None:
        self._folders: list[str] = []  # each run's folder text (ends with a separator)
        self._run_starts: list[int] = []  # index of each run's first path
        self._ends = array("q")  # end of each name in _names
        self._names = bytearray()

    def extend(self, folder: str, names: Iterable[str]) -> None:
        """Append ``folder + name`` for each of ``names`` (``folder`` ends with the path
        separator, as ``os.path.join(dirpath, "")`` gives it)."""
        encoded = [name.encode("utf-8", "surrogateescape") for name in names]
        if not encoded:
            return
        self._folders.append(folder)
        self._run_starts.append(len(self._ends))
        ends = itertools.accumulate(map(len, encoded), initial=len(self._names))
        self._ends.extend(itertools.islice(ends, 1, None))
        self._names += b"".join(encoded)

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._path(i) for i in range(*index.indices(len(self)))]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise RowIndexError(f"path index {index} out of range for {n} paths")
        return self._path(index)

    def __iter__(self) -> Iterator[str]:
        ends, names = self._ends, self._names
        bounds = [*self._run_starts, len(ends)]
        for run, folder in enumerate(self._folders):
            first, stop = bounds[run], bounds[run + 1]
            start = ends[first - 1] if first else 0
            for end in ends[first:stop]:
                yield folder + names[start:end].decode("utf-8", "surrogateescape")
                start = end

    def _path(self, index: int) -> str:
        run = bisect.bisect_right(self._run_starts, index) - 1
        start = self._ends[index - 1] if index else 0
        name = self._names[start : self._ends[index]].decode("utf-8", "surrogateescape")
        return self._folders[run] + name
