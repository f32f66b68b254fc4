"""A LangChain (v1) agent middleware that uses compactor in place of
`SummarizationMiddleware`: the agent's state keeps every message, compactor
stores them, and each model call is sent compactor's context (summary,
carried state and the recent tail) instead of the whole history.

Needs the `langchain` extra (`langchain>=1`)."""

from __future__ import annotations

import logging
import uuid
from typing import Any, Awaitable, Callable, Sequence

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage

from ._client import AsyncCompactor, Compactor
from .convert.langchain import from_langchain, to_langchain
from .errors import CompactorError
from .types import Usage, Workstream

__all__ = ["CompactorMiddleware"]

log = logging.getLogger("compactor_client.langchain")

WorkstreamOf = Callable[[ModelRequest[Any]], Workstream]


def thread_workstream(domain: str = "agent") -> WorkstreamOf:
    """The default: the run's `thread_id` (`config["configurable"]["thread_id"]`) in `domain`."""

    def of(_request: ModelRequest[Any]) -> Workstream:
        from langgraph.config import get_config

        thread = (get_config().get("configurable") or {}).get("thread_id")
        if not thread:
            raise CompactorError(
                "CompactorMiddleware", "no thread_id in the run's config: pass config={'configurable': {'thread_id': …}} or `workstream=`"
            )
        return Workstream(domain, str(thread))

    return of


class CompactorMiddleware(AgentMiddleware):
    """Before each model call: stores the messages the agent added since the
    last call (each once, by its message id), waits at most `wait` seconds
    for a compaction under way, and sends the model compactor's context. After
    it: stores the model's answer and ends the turn, so compactor queues a
    compaction when the workstream is over its trigger.

    When compactor cannot be reached the call goes ahead with the agent's
    own messages (logged as a warning): the agent keeps working, and the
    messages not stored are sent with the next call.
    """

    def __init__(
        self,
        client: Compactor | None = None,
        *,
        async_client: AsyncCompactor | None = None,
        workstream: WorkstreamOf | None = None,
        wait: float = 5.0,
    ) -> None:
        super().__init__()
        if client is None and async_client is None:
            raise ValueError("CompactorMiddleware needs a Compactor, an AsyncCompactor, or both")
        self.client = client
        self.async_client = async_client
        self.workstream = workstream or thread_workstream()
        self.wait = wait
        #: Per workstream, the id of the last message stored.
        self._stored: dict[Workstream, str] = {}

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        if self.client is None:
            raise CompactorError("CompactorMiddleware", "a synchronous agent run needs `client=Compactor(…)`")
        key = self.workstream(request)
        sent = request
        try:
            fresh = self._fresh(key, request.messages)
            if fresh:
                self.client.append_messages(key, from_langchain(fresh, tool_names=_call_names(request.messages), client_ids=True))
                self._mark(key, fresh)
            self.client.wait_until_ready(key, wait=self.wait)
            sent = _with_context(request, self.client.build_context(key)["messages"])
        except CompactorError as error:
            log.warning("compactor unavailable, the model gets the agent's own messages: %s", error)
        response = handler(sent)
        answers = _answers(response)
        try:
            self.client.append_messages(key, from_langchain(answers, tool_names=_call_names(request.messages), client_ids=True), finalize=True, usage=_usage(answers))
            self._mark(key, answers)
        except CompactorError as error:
            log.warning("compactor unavailable, the answer is stored with the next call: %s", error)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        if self.async_client is None:
            raise CompactorError("CompactorMiddleware", "an async agent run needs `async_client=AsyncCompactor(…)`")
        api = self.async_client
        key = self.workstream(request)
        sent = request
        try:
            fresh = self._fresh(key, request.messages)
            if fresh:
                await api.append_messages(key, from_langchain(fresh, tool_names=_call_names(request.messages), client_ids=True))
                self._mark(key, fresh)
            await api.wait_until_ready(key, wait=self.wait)
            sent = _with_context(request, (await api.build_context(key))["messages"])
        except CompactorError as error:
            log.warning("compactor unavailable, the model gets the agent's own messages: %s", error)
        response = await handler(sent)
        answers = _answers(response)
        try:
            await api.append_messages(key, from_langchain(answers, tool_names=_call_names(request.messages), client_ids=True), finalize=True, usage=_usage(answers))
            self._mark(key, answers)
        except CompactorError as error:
            log.warning("compactor unavailable, the answer is stored with the next call: %s", error)
        return response

    def _fresh(self, key: Workstream, messages: Sequence[AnyMessage]) -> list[BaseMessage]:
        """The messages after the last one stored (all of them when it is not
        among them: a restart; compactor stores each id once anyway)."""
        last = self._stored.get(key)
        ids = [m.id for m in messages]
        start = ids.index(last) + 1 if last is not None and last in ids else 0
        for message in messages[start:]:
            if message.id is None:
                message.id = str(uuid.uuid4())
        return list(messages[start:])

    def _mark(self, key: Workstream, stored: Sequence[BaseMessage]) -> None:
        if stored and stored[-1].id is not None:
            self._stored[key] = stored[-1].id


def _with_context(request: ModelRequest[Any], context: Sequence[Any]) -> ModelRequest[Any]:
    """The request with compactor's context as its messages; the context's
    leading system messages (its summary) join the agent's system prompt."""
    messages = to_langchain(context)
    summary: list[str] = []
    while messages and isinstance(messages[0], SystemMessage):
        summary.append(messages.pop(0).text)
    if not summary:
        return request.override(messages=messages)
    prompt = "\n\n".join(([request.system_message.text] if request.system_message else []) + summary)
    return request.override(messages=messages, system_message=SystemMessage(content=prompt))


def _answers(response: ModelResponse[Any]) -> list[BaseMessage]:
    """The model's messages, each given an id now, so that the agent's state
    keeps the id compactor stored it under."""
    for message in response.result:
        if message.id is None:
            message.id = str(uuid.uuid4())
    return list(response.result)


def _usage(answers: Sequence[BaseMessage]) -> Usage | None:
    for message in reversed(answers):
        if isinstance(message, AIMessage) and message.usage_metadata:
            meta = message.usage_metadata
            return {"input_tokens": meta.get("input_tokens", 0), "output_tokens": meta.get("output_tokens", 0)}
    return None


def _call_names(messages: Sequence[BaseMessage]) -> dict[str, str]:
    """Call id → tool name of the calls in the agent's messages, for tool results stored after their call."""
    return {made: call["name"] for m in messages if isinstance(m, AIMessage) for call in m.tool_calls if (made := call.get("id"))}

