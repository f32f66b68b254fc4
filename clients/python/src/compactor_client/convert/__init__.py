"""Converters between compactor's messages and those of the SDKs chat backends use."""

from ._common import PRUNED_PLACEHOLDER, call_tool_names
from .anthropic import AnthropicRequest, from_anthropic, to_anthropic
from .openai import from_openai, to_openai

__all__ = [
    "PRUNED_PLACEHOLDER",
    "AnthropicRequest",
    "call_tool_names",
    "from_anthropic",
    "from_openai",
    "to_anthropic",
    "to_openai",
]
