"""What the converters share: the placeholder of pruned tool output, the
tool name a result needs, and files as the URIs our parts hold."""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

from ..errors import ConversionError
from ..types import Part, PartFile, PartToolResult

#: What a model is shown for a tool result that tool-output pruning cleared.
PRUNED_PLACEHOLDER = "[Old tool result content cleared]"

MessageLike = Mapping[str, object]


def result_text(part: PartToolResult) -> str:
    """The text a model is shown for a tool result: its output, or the placeholder once pruned."""
    return PRUNED_PLACEHOLDER if part.get("pruned") else (part.get("output") or "")


def file_mention(part: PartFile) -> str:
    """How a file no SDK shape can carry is mentioned in text."""
    name = part.get("name")
    return f"[file {name}: {part['uri']}]" if name else f"[file: {part['uri']}]"


def is_image(part: PartFile) -> bool:
    return (part.get("media_type") or "").startswith("image/") or part["uri"].lower().startswith("data:image/")


def split_data_url(uri: str) -> tuple[str, str] | None:
    """The media type and base64 data of a `data:…;base64,` URL."""
    match = re.match(r"^data:([^;,]+);base64,(.*)$", uri, re.S | re.I)
    return (match.group(1), match.group(2)) if match else None


def visible_parts(parts: Iterable[Part]) -> list[Part]:
    """Parts a model is sent: reasoning is left out (compactor does not carry it either)."""
    return [p for p in parts if p["type"] != "reasoning"]


class ToolNames:
    """Tool names by call id: SDKs that name a result only by its call's id
    (OpenAI, Anthropic) get the name from the call, earlier in the same
    conversation or in `known` (calls converted earlier)."""

    def __init__(self, known: Mapping[str, str] | None = None) -> None:
        self._names: dict[str, str] = dict(known or {})

    def remember(self, call_id: str, name: str) -> None:
        self._names[call_id] = name

    def of(self, operation: str, call_id: str) -> str:
        name = self._names.get(call_id)
        if name is None:
            raise ConversionError(
                operation,
                f"a tool result answers call {call_id!r}, which no tool call of these messages made; "
                "pass the earlier calls' names as `tool_names` (call_tool_names(history) collects them)",
            )
        return name


def call_tool_names(messages: Sequence[Mapping[str, object]]) -> dict[str, str]:
    """Call id → tool name of every tool call in `messages` (ours)."""
    names: dict[str, str] = {}
    for message in messages:
        parts = message.get("parts")
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == "tool_call":
                names[str(part["call_id"])] = str(part["tool_name"])
    return names
