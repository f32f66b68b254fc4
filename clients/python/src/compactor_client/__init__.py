"""compactor-client: the HTTP API of a compactor worker, sync and async,
typed from its OpenAPI document, and converters between its messages and
those of the OpenAI, Anthropic and LangChain SDKs (the LangChain ones in
`compactor_client.convert.langchain`, with the `langchain` extra)."""

from ._client import VERSION, AsyncCompactor, Compactor
from ._retry import Retry, RetryEvent
from .convert import (
    PRUNED_PLACEHOLDER,
    call_tool_names,
    from_anthropic,
    from_openai,
    to_anthropic,
    to_openai,
)
from .errors import (
    ApiError,
    CompactorError,
    ConversionError,
    NetworkError,
    RequestTimeout,
    UnexpectedResponseError,
    is_api_error,
)
from .types import Workstream

__version__ = VERSION

__all__ = [
    "PRUNED_PLACEHOLDER",
    "VERSION",
    "ApiError",
    "AsyncCompactor",
    "Compactor",
    "CompactorError",
    "ConversionError",
    "NetworkError",
    "RequestTimeout",
    "Retry",
    "RetryEvent",
    "UnexpectedResponseError",
    "Workstream",
    "__version__",
    "call_tool_names",
    "from_anthropic",
    "from_openai",
    "is_api_error",
    "to_anthropic",
    "to_openai",
]
