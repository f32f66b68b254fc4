"""A scripted 300-turn conversation through the chat backend (served by
uvicorn on loopback), with compactor live (tests/clients/run's worker, an
8,000-token window) and a fake OpenAI-compatible model
(examples/fake-openai, counting every prompt in o200k_base tokens): the
model is never sent more than the window, and the conversation is compacted
along the way."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest
import uvicorn
from openai import AsyncOpenAI

from app import Chat, create_app
from compactor_client import AsyncCompactor, Compactor, Workstream

WINDOW = 8000
TURNS = 300
HERE = Path(__file__).resolve().parent


@pytest.fixture
def fake_model() -> Iterator[str]:
    process = subprocess.Popen(["node", str(HERE.parent / "fake-openai" / "server.mjs")], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield str(json.loads(process.stdout.readline())["url"])
    finally:
        process.terminate()
        process.wait(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_300_turns_never_send_the_model_more_than_the_window(fake_model: str) -> None:
    url, token = os.environ.get("COMPACTOR_URL"), os.environ.get("COMPACTOR_TOKEN")
    assert url and token, "COMPACTOR_URL and COMPACTOR_TOKEN name the live worker (tests/clients/run)"
    domain = f"pychat{secrets.token_hex(4)}"
    chat = Chat(
        compactor=AsyncCompactor(url, token=token),
        openai=AsyncOpenAI(base_url=f"{fake_model}/v1", api_key="test", max_retries=0),
        model="fake",
        domain=domain,
        system="You are the on-call assistant of the payments team.",
        wait=10.0,
    )
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(chat), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            for i in range(TURNS):
                text = f"Turn {i}: payment batch B-{1000 + i} failed with code E{500 + i % 40}; the retry queue holds {i * 3} items. What next?"
                answer = client.post("/conversations/c1/messages", json={"text": text})
                assert answer.status_code == 200, answer.text
                assert "Noted" in answer.json()["reply"]
            assert client.post("/conversations/c1/messages", json={"text": ""}).status_code == 422
        stats = httpx.get(f"{fake_model}/stats").json()
        print(f"calls {stats['calls']}, largest prompt {stats['max_prompt_tokens']} tokens (o200k_base), window {WINDOW}")
        assert stats["calls"] == TURNS
        assert stats["max_prompt_tokens"] <= WINDOW, stats
        with Compactor(url, token=token) as api:
            key = Workstream(domain, "c1")
            assert api.status(key)["compactions"] >= 1
            first = api.recall(key, "B-1000")["messages"]
            assert sorted(m["role"] for m in first) == ["assistant", "user"], "the first turn is stored once"
    finally:
        server.should_exit = True
        thread.join(10)
