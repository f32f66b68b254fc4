"""When and how long to wait before trying a request again."""

from __future__ import annotations

import random
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from datetime import datetime, timezone

#: Statuses that say "nothing was done, try again later".
RETRYABLE_STATUSES = frozenset({408, 429, 502, 503, 504})


@dataclass(frozen=True)
class Retry:
    """How a client retries what is safe to retry."""

    #: Tries in all, the first included (1 turns retries off).
    attempts: int = 4
    #: The first back-off's upper bound in seconds, doubled each try.
    base_delay: float = 0.25
    #: No back-off is longer.
    max_delay: float = 10.0
    #: A `Retry-After` longer than this is not waited for: the error is raised at once.
    max_retry_after: float = 60.0

    def backoff(self, attempt: int) -> float:
        """The wait before try `attempt + 1`: full jitter, so clients that failed together do not return together."""
        bound: float = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return random.uniform(0, bound)


@dataclass(frozen=True)
class RetryEvent:
    """What a retry hook is told before each wait."""

    operation: str
    #: The try that failed, from 1.
    attempt: int
    #: How long the client waits before the next try, in seconds.
    delay: float
    #: Whether `delay` is the server's `Retry-After`.
    from_retry_after: bool
    error: Exception


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """A `Retry-After` header in seconds: delta-seconds or an HTTP date (a past date is 0)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        at = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    now = now or datetime.now(timezone.utc)
    return max(0.0, (at - now).total_seconds())
