"""fsspec behind one small seam: open a URL's filesystem, stat and download objects.

fsspec (and s3fs for ``s3://``, gcsfs for ``gs://``, aiohttp for ``http(s)://``) is
imported here, lazily; a missing one raises an ImportError naming ``mrecord[remote]``.
Every third-party failure is wrapped: a missing object becomes
:class:`~mrecord.errors.DatasetNotFoundError`, anything else (connection refused,
timeouts, access denied) :class:`~mrecord.errors.RemoteStorageError`, naming the URL.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mrecord.errors import (
    ArgumentError,
    DatasetNotFoundError,
    MissingDependencyError,
    RemoteStorageError,
)

__all__ = ["RemoteFile", "remote_file", "unreachable"]

# What tells two versions of an object apart, per backend (s3: ETag, http: ETag or
# Last-Modified, gcs: generation); the size is always part of the tag too.
_TAG_KEYS = ("ETag", "etag", "generation", "Last-Modified", "LastModified", "mtime")
_EXTRA = "pip install 'mrecord[remote]'"


@contextmanager
def _wrapped(url: str, doing: str) -> Iterator[None]:
    """Turn a third-party failure while ``doing`` something with ``url`` into our errors."""
    try:
        yield
    except FileNotFoundError as exc:
        if _really_missing(exc):
            raise DatasetNotFoundError(f"remote file {url!r} does not exist ({exc})") from exc
        cause = exc.__cause__
        raise RemoteStorageError(
            f"{doing} {url!r} failed: {type(cause).__name__}: {cause}; check the URL and that "
            "the server is up"
        ) from exc
    except (DatasetNotFoundError, RemoteStorageError):
        raise
    except Exception as exc:
        if _past_the_end(exc):
            raise RemoteStorageError(
                f"{doing} {url!r} failed: the store sent nothing instead of the bytes asked "
                "for: they lie past the end of the object, which is shorter than when it was "
                "opened (it changed or was cut short); open the dataset again"
            ) from exc
        raise RemoteStorageError(
            f"{doing} {url!r} failed: {type(exc).__name__}: {exc}; check the URL, the "
            "network and the credentials (storage_options in code; from the command line, "
            "the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, ...)"
        ) from exc


def _past_the_end(exc: Exception) -> bool:
    """A range request past the object's end: HTTP 416 (aiohttp's ``status``), or S3's
    ``InvalidRange`` error code (botocore's ``response``)."""
    if getattr(exc, "status", None) == 416:
        return True
    response = getattr(exc, "response", None)
    error = response.get("Error", {}) if isinstance(response, dict) else {}
    return isinstance(error, dict) and error.get("Code") == "InvalidRange"


def _really_missing(exc: FileNotFoundError) -> bool:
    """fsspec's HTTP backend reports *any* failure to stat a URL as FileNotFoundError, a
    refused connection included; only a 404/410 answer (or no cause at all) is "missing"."""
    cause = exc.__cause__
    return cause is None or getattr(cause, "status", None) in (404, 410)


@dataclass(frozen=True)
class RemoteFile:
    """One remote object: its URL, its filesystem, size and a version tag (ETag or mtime)."""

    url: str
    fs: Any
    path: str
    size: int
    tag: str

    def download(self, local: Path) -> int:
        """Copy the whole object to the file ``local``; returns the bytes written."""
        with _wrapped(self.url, "downloading"):
            self.fs.get_file(self.path, str(local))
        return local.stat().st_size

    def read_range(self, start: int, stop: int) -> bytes:
        """Bytes ``start:stop`` of the object, with one range request."""
        with _wrapped(self.url, "reading a range of"):
            data = self.fs.cat_file(self.path, start=start, end=stop)
        return self._exact(start, stop, bytes(data))

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Bytes ``start:stop`` of each range, the requests sent concurrently (fsspec's
        ``cat_ranges``: async backends gather them)."""
        if not ranges:
            return []
        with _wrapped(self.url, "reading ranges of"):
            got = self.fs.cat_ranges(
                [self.path] * len(ranges),
                [a for a, _ in ranges],
                [b for _, b in ranges],
                on_error="raise",
            )
        return [self._exact(a, b, bytes(d)) for (a, b), d in zip(ranges, got, strict=True)]

    def _exact(self, start: int, stop: int, data: bytes) -> bytes:
        """A range answer must be exactly the bytes asked for: a store that cuts one short
        (or sends more) never hands the reader misplaced bytes."""
        if len(data) != stop - start:
            raise RemoteStorageError(
                f"reading bytes {start}..{stop} of {self.url!r} ({self.size:,} bytes when "
                f"opened) returned {len(data):,} bytes instead of {stop - start:,}; the "
                "object changed or the transfer was cut: open the dataset again"
            )
        return data


def _filesystem(url: str, storage_options: Mapping[str, Any]) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError as exc:
        raise MissingDependencyError(f"reading {url!r} needs fsspec: {_EXTRA}") from exc
    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options))
    except ImportError as exc:
        raise MissingDependencyError(
            f"reading {url!r} needs a package fsspec names: {exc}. {_EXTRA} installs s3fs and "
            "the HTTP client; gs:// needs gcsfs"
        ) from exc
    except ValueError as exc:
        raise ArgumentError(f"{url!r} is not a URL fsspec can open: {exc}") from exc
    return fs, str(path)


def remote_file(url: str, storage_options: Mapping[str, Any] | None = None) -> RemoteFile:
    """Stat ``url`` (one request): DatasetNotFoundError when it is not there."""
    fs, path = _filesystem(url, storage_options or {})
    with _wrapped(url, "looking up"):
        info = fs.info(path)
    if info.get("type") == "directory":
        raise DatasetNotFoundError(f"{url!r} is a folder, not a data file")
    size = info.get("size")
    if not isinstance(size, int):
        raise RemoteStorageError(f"{url!r}: the server does not report the file's size")
    tag = next(
        (str(info[k]) for k in _TAG_KEYS if k in info),
        "",
    )
    return RemoteFile(url=url, fs=fs, path=path, size=size, tag=f"{size}:{tag}")


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (a :class:`RemoteStorageError`) says the store could not be reached
    at all (refused or timed-out connections, unknown host), as opposed to an answer
    (access denied, a server error): only then may a warm cache stand in for it."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        name = type(cause).__name__
        if isinstance(cause, (ConnectionError, TimeoutError)) or name in _UNREACHABLE:
            return True
        cause = cause.__cause__ or cause.__context__
    return False


# Third-party names for "no connection" (botocore, aiohttp), matched by name so that
# neither package is imported here.
_UNREACHABLE = frozenset(
    {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ConnectionClosedError",
        "ClientConnectorError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "gaierror",
    }
)
