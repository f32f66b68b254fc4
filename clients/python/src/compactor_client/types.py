"""Names for the API's types, taken from the generated models
(`_generated/models.py`), so they change when the API does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from typing_extensions import TypeAlias

from ._generated.models import (
    AppendResponse,
    CancelReply,
    CancelThen,
    ContextMessage,
    DeadLettersPage,
    DeliveriesPage,
    EnqueueOutcomeAdded,
    EnqueueOutcomeCoalesced,
    EnqueueOutcomeFollowup,
    ErrorCode,
    HeadOutcome,
    IncomingMessage,
    JobSummary,
    JobsPage,
    PartFile,
    PartReasoning,
    PartText,
    PartToolCall,
    PartToolResult,
    PauseState,
    PurgeReport,
    QueueOverview,
    Readiness,
    Recall,
    RetriedMany,
    RetriedOne,
    RetryReport,
    Role,
    RunsPage,
    TurnContext,
    TurnOutcomeBreakerOpen,
    TurnOutcomeNotDue,
    TurnOutcomeRequested,
    TurnOutcomeUnavailable,
    Usage,
    WorkersList,
    WorkstreamsPage,
    WorkstreamStatus,
)

__all__ = [
    "AppendResponse",
    "CancelReply",
    "CancelThen",
    "ContextMessage",
    "DeadLettersPage",
    "DeliveriesPage",
    "EnqueueOutcome",
    "ErrorCode",
    "HeadOutcome",
    "IncomingMessage",
    "JobSummary",
    "JobsPage",
    "Part",
    "PartFile",
    "PartReasoning",
    "PartText",
    "PartToolCall",
    "PartToolResult",
    "PauseState",
    "PurgeReport",
    "QueueOverview",
    "Readiness",
    "Recall",
    "RetriedMany",
    "RetriedOne",
    "RetryReport",
    "Role",
    "RunsPage",
    "TurnContext",
    "TurnOutcome",
    "Usage",
    "WorkersList",
    "Workstream",
    "WorkstreamsPage",
    "WorkstreamStatus",
]


#: One typed piece of a message.
Part: TypeAlias = Union[PartText, PartToolCall, PartToolResult, PartReasoning, PartFile]
#: What a compaction request did: `added`, `coalesced` or `followup`.
EnqueueOutcome: TypeAlias = Union[EnqueueOutcomeAdded, EnqueueOutcomeCoalesced, EnqueueOutcomeFollowup]
#: What ending a turn did.
TurnOutcome: TypeAlias = Union[TurnOutcomeNotDue, TurnOutcomeRequested, TurnOutcomeBreakerOpen, TurnOutcomeUnavailable]


@dataclass(frozen=True)
class Workstream:
    """One conversation: a domain (1-32 of `a-z 0-9 _ -`, starting with a
    letter) and an entity id (1-128 of `A-Z a-z 0-9 _ - .`)."""

    domain: str
    entity: str
