"""The LangChain agent middleware, in a real agent (`create_agent`, a
checkpointer, a tool) whose model is `ChatOpenAI` talking to a fake
OpenAI-compatible server on loopback, and compactor live: every message the
agent made is stored once, compactions run, and the model is sent
compactor's context, never the whole history."""

from __future__ import annotations

import json
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from compactor_client import AsyncCompactor, Compactor, Workstream
from compactor_client.langchain_middleware import CompactorMiddleware

from .conftest import Answer, Recorded, Worker, json_answer, serve, unique

WINDOW = 8000


def fake_model(request: Recorded) -> Answer:
    """A tool call for each new user question, then an answer once the tool answered."""
    body = json.loads(request.body)
    messages: list[dict[str, Any]] = body["messages"]
    last = messages[-1]
    n = len(messages)
    if last["role"] == "user":
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{n}_{unique('')}", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"shard": n})}}],
        }
    else:
        message = {"role": "assistant", "content": f"Shard report read: replication lag normal, pool at {n}% of its size, nothing to do."}
    return json_answer(
        200,
        {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": "fake",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        },
    )


@tool
def lookup(shard: int) -> str:
    """Reads a shard's health report."""
    return f"shard {shard}: lag 12 ms, pool 40/50, 3 slow queries over 2 s in the last hour, error rate 0.02 %"


def question(i: int) -> str:
    return f"Turn {i}: how is shard {i * 7} of the orders table doing, its replication lag, pool sizes and slow queries? E{4000 + i}"


def test_an_agent_runs_on_compactor_s_context(worker: Worker) -> None:
    model_server = serve(fake_model)
    key = Workstream(unique("lc"), unique("thread-"))
    try:
        with Compactor(worker.url, token=worker.token) as api:
            agent = create_agent(
                ChatOpenAI(model="fake", base_url=f"{model_server.url}/v1", api_key="test", max_retries=0),  # type: ignore[arg-type]
                tools=[lookup],
                system_prompt="You are the on-call assistant of the orders team.",
                middleware=[CompactorMiddleware(api, workstream=lambda _r: key, wait=10)],
                checkpointer=InMemorySaver(),
            )
            config: Any = {"configurable": {"thread_id": key.entity}}
            for i in range(60):
                state = agent.invoke({"messages": [HumanMessage(question(i))]}, config)
            held = len(state["messages"])
            assert held == 240, "the agent's own state keeps every message"
            status = api.status(key)
            assert status["compactions"] >= 1, status
            stored = api.recall(key, "E4000")["messages"]
            assert len(stored) == 1 and stored[0]["compacted"], "the first turn is stored once, and compacted"
            context = api.build_context(key)
            assert context["tokens"] <= WINDOW
        last = json.loads(model_server.requests[-1].body)["messages"]
        assert len(last) < held, f"the model got {len(last)} messages, not the {held} of the agent's state"
        assert last[0]["role"] == "system"
        assert last[0]["content"].startswith("You are the on-call assistant"), "the agent's prompt comes first"
        assert len(last[0]["content"]) > len("You are the on-call assistant of the orders team."), "compactor's summary joins it"
        assert all(m["role"] != "system" for m in last[1:])
        assert len(model_server.requests) == 120
    finally:
        model_server.close()


async def test_the_async_agent_path_stores_each_message_once(worker: Worker) -> None:
    model_server = serve(fake_model)
    key = Workstream(unique("lc"), unique("thread-"))
    try:
        async with AsyncCompactor(worker.url, token=worker.token) as api:
            agent = create_agent(
                ChatOpenAI(model="fake", base_url=f"{model_server.url}/v1", api_key="test", max_retries=0),  # type: ignore[arg-type]
                tools=[lookup],
                middleware=[CompactorMiddleware(async_client=api, workstream=lambda _r: key)],
                checkpointer=InMemorySaver(),
            )
            config: Any = {"configurable": {"thread_id": key.entity}}
            for i in range(3):
                await agent.ainvoke({"messages": [HumanMessage(question(i))]}, config)
            context = await api.build_context(key)
        roles = [m["role"] for m in context["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant"] * 3, roles
    finally:
        model_server.close()


def test_without_compactor_the_agent_keeps_working_on_its_own_messages(worker: Worker) -> None:
    model_server = serve(fake_model)
    gone = serve(lambda _r: None)
    gone.close()
    try:
        with Compactor(gone.url, retry=None) as nowhere:
            agent = create_agent(
                ChatOpenAI(model="fake", base_url=f"{model_server.url}/v1", api_key="test", max_retries=0),  # type: ignore[arg-type]
                tools=[lookup],
                middleware=[CompactorMiddleware(nowhere, workstream=lambda _r: Workstream("lc", "offline"))],
                checkpointer=InMemorySaver(),
            )
            state = agent.invoke({"messages": [HumanMessage(question(1))]}, {"configurable": {"thread_id": "offline"}})
        assert len(state["messages"]) == 4
        assert len(json.loads(model_server.requests[-1].body)["messages"]) == 3
    finally:
        model_server.close()
