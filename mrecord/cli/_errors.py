"""Exit codes of the ``mrecord`` command and the mapping from errors to them.

====  ==========================================================================
code  meaning
====  ==========================================================================
0     success
1     ``verify`` found damage
2     usage error: bad option or argument, output exists without ``--overwrite``
3     bad input file: missing, unreadable (permissions), truncated, wrong format, corrupt,
      rows that do not fit
4     any other failure (dataset locked by another writer, ...)
5     the machine failed a write: disk full, quota, permission, read-only file system,
      I/O error, a vanished folder (``mrecord.errors.StorageError``); nothing of the
      interrupted commit is visible unless the message says it is durable
130   interrupted (Ctrl-C)
====  ==========================================================================

Errors are printed as one line on stderr (``Error: ...``), never a traceback
unless ``mrecord --debug`` is given.
"""

from __future__ import annotations

import click

from mrecord import errors

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_DAMAGED",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_STORAGE",
    "EXIT_USAGE",
    "CommandError",
    "exit_code_for",
]

EXIT_OK = 0
EXIT_DAMAGED = 1
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3
EXIT_FAILURE = 4
EXIT_STORAGE = 5
EXIT_INTERRUPTED = 130

_BAD_INPUT: tuple[type[BaseException], ...] = (
    errors.ConversionError,
    errors.CorruptFileError,
    errors.DatasetNotFoundError,
    errors.MissingIndexError,
    errors.IndexMismatchError,
    errors.ForeignShardError,
    errors.RowValidationError,
    errors.UnreadableFileError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
)
_USAGE: tuple[type[BaseException], ...] = (
    errors.ArgumentError,
    errors.DatasetExistsError,
    errors.SchemaError,
)


class CommandError(click.ClickException):
    """A failure reported as one line on stderr with a meaningful exit code."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]


def exit_code_for(exc: BaseException) -> int:
    """The exit code for an exception raised by a command."""
    if isinstance(exc, errors.StorageError):
        return EXIT_STORAGE
    if isinstance(exc, _BAD_INPUT):
        return EXIT_BAD_INPUT
    if isinstance(exc, _USAGE):
        return EXIT_USAGE
    return EXIT_FAILURE
