"""What the client raises: every error is a `CompactorError`."""

from __future__ import annotations

from typing import Generic, TypeVar

from ._generated.models import ErrorCode

C = TypeVar("C", bound=ErrorCode)


class CompactorError(Exception):
    """The base of every error this package raises."""

    def __init__(self, operation: str, message: str) -> None:
        super().__init__(f"{operation}: {message}")
        #: The client call that failed (`append_messages`, `status`, …).
        self.operation = operation


class ApiError(CompactorError, Generic[C]):
    """The API answered with an error body; `code` is its `ErrorCode`."""

    def __init__(self, operation: str, status: int, code: C, message: str, retry_after: float | None = None) -> None:
        super().__init__(operation, f"{status} {code}: {message}")
        self.status = status
        self.code: C = code
        self.detail = message
        #: The server's `Retry-After`, in seconds, when it sent one.
        self.retry_after = retry_after


class UnexpectedResponseError(CompactorError):
    """An answer that is not the API's (a proxy's error page, a cut body)."""

    def __init__(self, operation: str, status: int, body: str, reason: str) -> None:
        super().__init__(operation, f"unexpected {status} answer ({reason}): {body[:200]}")
        self.status = status
        self.body = body[:500]


class NetworkError(CompactorError):
    """No answer: connection refused or reset, DNS, TLS."""


class RequestTimeout(CompactorError):
    """A try outlasted the call's timeout."""

    def __init__(self, operation: str, timeout: float) -> None:
        super().__init__(operation, f"no answer within {timeout:g} s")
        self.timeout = timeout


class ConversionError(CompactorError):
    """A message could not be converted to or from another SDK's shape."""


def is_api_error(error: BaseException, *codes: ErrorCode) -> bool:
    """Whether `error` is an `ApiError`, optionally with one of `codes`."""
    return isinstance(error, ApiError) and (not codes or error.code in codes)
