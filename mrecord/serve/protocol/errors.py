"""The error codes of ``mrecord serve``, as typed values (stable: clients match on them).

An error answer is ``{"error": {"code": CODE, "message": text}}``: the JSON body of an
HTTP answer with the code's status, or a same-host reply. ``busy`` is the one code a
reader retries (after a back-off): HTTP says it with 503 (uvicorn's own plain-text
answer beyond ``--max-connections``), the same-host socket with this code.
"""

from __future__ import annotations

import enum

from mrecord.errors import (
    ArgumentError,
    AuthenticationError,
    CorruptFileError,
    DatasetNotFoundError,
    DatasetServerError,
    MrecordError,
    SchemaError,
)

__all__ = ["ERROR_CODES", "ErrorCode", "error_for"]


class ErrorCode(str, enum.Enum):
    """Every code an error answer may carry."""

    BAD_REQUEST = "bad_request"
    BAD_IDS = "bad_ids"
    UNKNOWN_COLUMN = "unknown_column"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN_HOST = "forbidden_host"
    UNKNOWN_DATASET = "unknown_dataset"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    REQUEST_TIMEOUT = "request_timeout"
    TOO_LARGE = "too_large"
    NOT_AN_IMAGE = "not_an_image"
    BUSY = "busy"
    CORRUPT_FILE = "corrupt_file"
    DATASET_ERROR = "dataset_error"
    INTERNAL = "internal"

    @property
    def status(self) -> int:
        """The HTTP status of an answer with this code."""
        return _STATUS[self]


_STATUS = {
    ErrorCode.BAD_REQUEST: 400,
    ErrorCode.BAD_IDS: 400,
    ErrorCode.UNKNOWN_COLUMN: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN_HOST: 403,
    ErrorCode.UNKNOWN_DATASET: 404,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.REQUEST_TIMEOUT: 408,
    ErrorCode.TOO_LARGE: 413,
    ErrorCode.NOT_AN_IMAGE: 415,
    ErrorCode.BUSY: 503,
    ErrorCode.CORRUPT_FILE: 500,
    ErrorCode.DATASET_ERROR: 500,
    ErrorCode.INTERNAL: 500,
}

ERROR_CODES: dict[str, int] = {code.value: code.status for code in ErrorCode}
"""Every error code the API returns, with its HTTP status."""

_ERROR_TYPES: dict[str, type[MrecordError]] = {
    ErrorCode.UNAUTHORIZED.value: AuthenticationError,
    ErrorCode.UNKNOWN_DATASET.value: DatasetNotFoundError,
    ErrorCode.CORRUPT_FILE.value: CorruptFileError,
    ErrorCode.UNKNOWN_COLUMN.value: SchemaError,
    ErrorCode.BAD_REQUEST.value: ArgumentError,
    ErrorCode.BAD_IDS.value: ArgumentError,
    ErrorCode.TOO_LARGE.value: ArgumentError,
}


def error_for(where: str, code: str, message: str) -> MrecordError:
    """The mrecord error a reader raises for an error answer (the code chooses the type;
    codes a reader cannot act on are :class:`~mrecord.errors.DatasetServerError`)."""
    cls = _ERROR_TYPES.get(code, DatasetServerError)
    return cls(f"{where}: {message} [{code}]")
