"""Every error mrecord raises, in one tree.

Each leaf also inherits the builtin exception a Python user would expect and, where
MindSpore 2.10 raises another builtin in that situation, that one too (checked against
MindSpore in tests/conformance/), so ``except ValueError`` / ``except
RuntimeError`` code written against MindSpore keeps working::

    MrecordError
    ├── SchemaError(ValueError, RuntimeError) bad schema, unknown column or index field
    ├── RowValidationError(ValueError)     a row does not fit the schema (names row and field)
    ├── DatasetExistsError(FileExistsError, RuntimeError) output files exist, overwrite=False
    ├── DatasetNotFoundError(FileNotFoundError, ValueError) a data file is missing
    │   └── AppendTargetMissingError(RuntimeArgumentError) open_for_append of no dataset
    ├── MissingIndexError(FileNotFoundError)   a shard's .db is missing
    ├── UnreadableFileError(PermissionError)   a data file or .db exists but may not be read
    ├── IndexMismatchError(ValueError)     a .db does not belong to its data file
    ├── StorageError(OSError)              the machine failed a write (keeps errno; names
    │   │                                  file, operation and the dataset's state)
    │   ├── DiskFullError                  ENOSPC, EDQUOT
    │   ├── StoragePermissionError(PermissionError)  EACCES, EPERM, EROFS
    │   └── IndexWriteError                SQLite could not write a .db
    ├── CorruptFileError(ValueError, RuntimeError) damaged or truncated bytes (file, page, offset)
    │   ├── ChecksumError                  a checksum did not match
    │   └── NotAnMrecordFileError          another kind of file (a PNG, a Parquet file, ...)
    ├── FormatError(ValueError)            bytes break the format spec (mrecord.format, serve wire;
    │   │                                  the reader re-raises them as CorruptFileError + file)
    │   ├── LayoutError                    the header or trailer is not an mrecord one
    │   ├── MetadataError                  metadata bytes are malformed or unsafe
    │   ├── ChunkFormatError               a chunk's bytes contradict its declared layout
    │   └── DecompressionError             stored bytes do not decompress to the recorded size
    ├── ForeignShardError(ValueError)      a shard from another dataset, or a hostile sibling name
    ├── DatasetLockedError(BlockingIOError) another writer holds the dataset
    ├── UnsupportedPlatformError(NotImplementedError) no fcntl file locks here (writers need them)
    ├── RemoteStorageError(OSError)        a remote store (s3://, http://) failed or is unreachable
    ├── WriterStateError(RuntimeError)     FileWriter called out of order (commit twice, ...)
    ├── ArgumentError(ValueError)          conflicting or out-of-range arguments
    │   ├── RowIndexError(IndexError)      a row id outside the dataset
    │   ├── RuntimeArgumentError(RuntimeError) arguments MindSpore rejects with RuntimeError
    │   │   └── SamplerError               bad sampler/sharding setup (sampler + shuffle, ...)
    │   ├── UnknownNameError(KeyError)     a name no registry knows (a shuffle mode, ...)
    │   └── UnsupportedArgumentError(NotImplementedError) an argument MindSpore does not support
    ├── WrongTypeError(TypeError)          an argument or value of the wrong type
    ├── MissingDependencyError(ImportError) an optional package is missing (names the extra)
    ├── PipelineError(RuntimeError)        the dataset graph is invalid or an op failed
    │   └── OperationError                 a user function raised (names op, column, row)
    ├── OffloadError(ValueError)           an offload constraint was violated
    ├── SinkTimeoutError(TimeoutError)     get_next waited longer than op_timeout
    ├── ConversionError(ValueError)        a conversion source is malformed
    │   └── RawDataError                   CIFAR-10 / MNIST / image-folder input missing or bad
    ├── CheckpointError(ValueError)        a resume checkpoint is malformed or from another dataset
    ├── DecodeError(ValueError, RuntimeError) bytes given to vision.Decode are not an image
    ├── DatasetServerError(ConnectionError) a dataset server (`mrecord serve`) is gone or failed
    ├── SlowClientError(TimeoutError)      a dataset server dropped a client that read nothing
    ├── TrainingError(ValueError)          training stopped: a step's loss is NaN or infinite
    └── AuthenticationError(PermissionError) a dataset server refused the token

No module of ``mrecord/`` raises a bare builtin exception (``tests/docs/test_typed_errors.py``
walks them all; only protocol-required raises such as ``StopIteration`` in ``__next__`` are
allowed). Argument checks with MindSpore's messages are in ``mrecord/arguments.py``.

Third-party exceptions (``zstandard.ZstdError``, msgpack, ``sqlite3``) are always
wrapped: ``raise CorruptFileError(...) from exc``.
"""

from __future__ import annotations

__all__ = [
    "AppendTargetMissingError",
    "ArgumentError",
    "AuthenticationError",
    "CheckpointError",
    "ChecksumError",
    "ChunkFormatError",
    "ConversionError",
    "CorruptFileError",
    "DatasetExistsError",
    "DatasetLockedError",
    "DatasetNotFoundError",
    "DatasetServerError",
    "DecodeError",
    "DecompressionError",
    "DiskFullError",
    "ForeignShardError",
    "FormatError",
    "IndexMismatchError",
    "IndexWriteError",
    "InsecureTokenWarning",
    "LayoutError",
    "MetadataError",
    "MissingDependencyError",
    "MissingIndexError",
    "MrecordError",
    "NotAnMrecordFileError",
    "OffloadError",
    "OperationError",
    "PipelineError",
    "RawDataError",
    "RemoteStorageError",
    "RowIndexError",
    "RowValidationError",
    "RuntimeArgumentError",
    "SamplerError",
    "SchemaError",
    "SinkTimeoutError",
    "SlowClientError",
    "StorageError",
    "StoragePermissionError",
    "TrainingError",
    "UnknownNameError",
    "UnreadableFileError",
    "UnsupportedArgumentError",
    "UnsupportedPlatformError",
    "WriterStateError",
    "WrongTypeError",
]


class MrecordError(Exception):
    """Root of every error raised by mrecord."""


class SchemaError(MrecordError, ValueError, RuntimeError):
    """A schema is invalid; the message names the field and the offending value."""


class RowValidationError(MrecordError, ValueError):
    """A row does not match the schema.

    Attributes ``row`` (index within the ``write_raw_data`` call) and ``field``
    say where; nothing of the rejected call is written.
    """

    def __init__(self, message: str, *, row: int | None = None, field: str | None = None):
        super().__init__(message)
        self.row = row
        self.field = field


class DatasetExistsError(MrecordError, FileExistsError, RuntimeError):
    """Output files already exist and ``overwrite`` was not requested."""


class DatasetNotFoundError(MrecordError, FileNotFoundError, ValueError):
    """A data file of the dataset does not exist."""


class MissingIndexError(MrecordError, FileNotFoundError):
    """A shard's ``.db`` index file is missing (``mrecord reindex FILE`` rebuilds it)."""


class IndexMismatchError(MrecordError, ValueError):
    """A ``.db`` index does not match its data file (other generation or dataset)."""


class CorruptFileError(MrecordError, ValueError, RuntimeError):
    """A file is damaged or truncated; the message names the file, page and byte offset."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        page: int | None = None,
        offset: int | None = None,
    ):
        super().__init__(message)
        self.path = path
        self.page = page
        self.offset = offset


class ChecksumError(CorruptFileError):
    """A stored checksum does not match the bytes read."""


class NotAnMrecordFileError(CorruptFileError):
    """The file is not an mrecord shard at all: its first bytes are another format's."""


class StorageError(MrecordError, OSError):
    """The machine failed a write: disk full, quota, permission, read-only file system,
    I/O error, a folder that vanished, a folder where a file should be.

    ``errno`` is the operating system's (``errno.ENOSPC``, ...), ``path`` the file,
    ``operation`` what was being done; the message also says what state the dataset is
    in ("nothing of this commit is visible; generation 3 is intact") and what to do.
    """

    def __init__(
        self,
        message: str,
        *,
        errno: int | None = None,
        path: str | None = None,
        operation: str | None = None,
    ):
        super().__init__(errno, message)
        self.message = message
        self.path = path
        self.filename = path
        self.operation = operation

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[object, ...]:  # keeps the keyword arguments across pickling
        return (_rebuild_storage_error, (type(self), self.message, self.errno, self.path,
                                         self.operation))


def _rebuild_storage_error(
    cls: type[StorageError], message: str, errno: int | None, path: str | None,
    operation: str | None,
) -> StorageError:
    return cls(message, errno=errno, path=path, operation=operation)


class DiskFullError(StorageError):
    """No space left on the device (``ENOSPC``) or the disk quota is exhausted (``EDQUOT``)."""


class UnreadableFileError(MrecordError, PermissionError):
    """A data file or ``.db`` exists but this process may not read it (``EACCES``, ``EPERM``).

    Not damage: the message names the file and says to check its permissions.
    """


class StoragePermissionError(StorageError, PermissionError):
    """Writing is not allowed: ``EACCES``, ``EPERM``, or a read-only file system (``EROFS``)."""


class IndexWriteError(StorageError):
    """SQLite failed while writing a shard's ``.db`` (disk full, permissions, ...)."""


class FormatError(MrecordError, ValueError):
    """Bytes do not follow the mrecord format; raised by the pure ``mrecord.format`` code.

    The format code never knows file names: the caller (the shard reader) re-raises it
    as :class:`CorruptFileError` naming the file, page and offset.
    """


class LayoutError(FormatError):
    """The header or trailer is not an mrecord one (caller adds the file name)."""


class MetadataError(FormatError):
    """Metadata bytes are malformed or unsafe (caller adds the file name)."""


class ChunkFormatError(FormatError):
    """A chunk's bytes are inconsistent with its declared layout (caller adds file/page)."""


class DecompressionError(FormatError):
    """Stored bytes do not decompress to the recorded size (caller adds file/page)."""


class ForeignShardError(MrecordError, ValueError):
    """A shard belongs to another dataset, or its metadata names a sibling unsafely."""


class DatasetLockedError(MrecordError, BlockingIOError):
    """Another live writer holds the dataset's lock."""


class UnsupportedPlatformError(MrecordError, NotImplementedError):
    """This platform lacks what the operation needs (``fcntl`` locks, which writers take)."""


class RemoteStorageError(MrecordError, OSError):
    """A remote store (``s3://``, ``http://``, ...) failed or was unreachable; names the URL."""


class WriterStateError(MrecordError, RuntimeError):
    """A FileWriter method was called in a state that does not allow it."""


class ArgumentError(MrecordError, ValueError):
    """Arguments conflict or are out of range."""


class RowIndexError(ArgumentError, IndexError):
    """A row id is outside the dataset (also an ``IndexError``, so ``reader[i]`` loops end)."""


class RuntimeArgumentError(ArgumentError, RuntimeError):
    """Arguments that MindSpore rejects with ``RuntimeError`` (its C++ layer checks them):
    a page size too big, a missing file to append to, a bad MindPage category id, ``OneHot``
    labels out of range, a sampler with ``shuffle``, ``shard_id`` without ``num_shards``.

    Both an :class:`ArgumentError` (mrecord's promise) and a ``RuntimeError`` (MindSpore's).
    """


class UnknownNameError(ArgumentError, KeyError):
    """A name that no registry knows (a shuffle mode, ...); the message lists the known ones."""


class UnsupportedArgumentError(ArgumentError, NotImplementedError):
    """An argument MindSpore accepts in its signature but does not support
    (``PKSampler(num_class=...)``); MindSpore raises ``NotImplementedError``."""


class WrongTypeError(MrecordError, TypeError):
    """An argument or value has the wrong type; the message names it, the type expected
    and the type (or value) given."""


class MissingDependencyError(MrecordError, ImportError):
    """An optional package is not installed; the message names it and the
    ``pip install 'mrecord[extra]'`` that brings it."""


class SamplerError(RuntimeArgumentError):
    """A sampler or sharding setup is invalid: a sampler with ``shuffle``, ``shard_id``
    without ``num_shards``, ... (MindSpore raises RuntimeError here; an ArgumentError too)."""


class AppendTargetMissingError(DatasetNotFoundError, RuntimeArgumentError):
    """``FileWriter.open_for_append`` was given a file that does not exist (MindSpore:
    RuntimeError); also a ``FileNotFoundError`` and an :class:`ArgumentError`."""


class PipelineError(MrecordError, RuntimeError):
    """The dataset graph is invalid, or running it failed."""


class OperationError(PipelineError):
    """A user function inside the pipeline raised; names the op, column and row."""


class OffloadError(MrecordError, ValueError):
    """An offload constraint was violated."""


class SinkTimeoutError(MrecordError, TimeoutError):
    """``get_next`` waited longer than ``op_timeout``; the message holds the producer's state."""


class ConversionError(MrecordError, ValueError):
    """A conversion source is malformed (wrong magic number, truncated, missing)."""


class RawDataError(ConversionError):
    """A raw dataset (CIFAR-10, MNIST, an image folder) is missing, truncated or foreign.

    Raised by the sources (``Cifar10Dataset``...) and the converters alike; a
    ``ValueError``, as MindSpore raises for a missing ``dataset_dir``.
    """


class CheckpointError(MrecordError, ValueError):
    """A resume checkpoint is malformed, or was written for another dataset or order."""


class DecodeError(MrecordError, ValueError, RuntimeError):
    """Bytes given to an image decoder are not a readable image; the message says what they were."""


class DatasetServerError(MrecordError, ConnectionError):
    """A dataset server cannot be reached (after retries), or answered with an unexpected error."""


class SlowClientError(MrecordError, TimeoutError):
    """A dataset server dropped a client that read nothing of an answer for its timeout."""


class TrainingError(MrecordError, ValueError):
    """Training stopped: a step's loss is NaN or infinite (MindSpore raises ValueError)."""


class AuthenticationError(MrecordError, PermissionError):
    """A dataset server refused the request: the bearer token is missing or wrong."""


class DescriptorLimitWarning(MrecordError, ResourceWarning):
    """A dataset has more shards than the process's limit on open file descriptors
    leaves room for (``ulimit -n``, whose hard limit mrecord cannot raise): its shards
    still read, but the rest of the process may run out of descriptors."""


class InsecureTokenWarning(MrecordError, UserWarning):
    """A bearer token is about to travel in clear text (``http://`` to a host other than
    this machine): anyone on the path can read it; serve with ``--tls-cert`` and use
    ``https://``."""
