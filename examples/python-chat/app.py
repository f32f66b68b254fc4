"""A small chat backend on FastAPI. `POST /conversations/{id}/messages` with
`{"text": "…"}` answers `{"reply": "…"}`: the user's words are stored in
compactor, the model (the official `openai` SDK) is sent compactor's context
for the conversation (a summary, carried state and the recent tail, never
the whole history), and its answer is stored with the turn's end, after
which compactor compacts in the background when the conversation is over
its trigger.

Run: `COMPACTOR_URL=… COMPACTOR_TOKEN=… OPENAI_API_KEY=… uvicorn --factory app:from_environment`."""

from __future__ import annotations

import os
from dataclasses import dataclass

from fastapi import FastAPI, HTTPException
from openai import AsyncOpenAI
from pydantic import BaseModel, Field

from compactor_client import ApiError, AsyncCompactor, Workstream, from_openai, to_openai


class Said(BaseModel):
    text: str = Field(min_length=1)


class Reply(BaseModel):
    reply: str
    context_tokens: int


@dataclass
class Chat:
    compactor: AsyncCompactor
    openai: AsyncOpenAI
    model: str
    #: compactor's domain for these conversations.
    domain: str
    #: The system prompt, sent first on every call.
    system: str
    #: How long a turn waits for a compaction under way, in seconds.
    wait: float = 5.0

    async def turn(self, conversation: str, text: str) -> Reply:
        key = Workstream(self.domain, conversation)
        await self.compactor.append_messages(key, [{"role": "user", "parts": [{"type": "text", "text": text}]}])
        await self.compactor.wait_until_ready(key, wait=self.wait)
        context = await self.compactor.build_context(key)
        answer = await self.openai.chat.completions.create(
            model=self.model,
            messages=[{"role": "system", "content": self.system}, *to_openai(context["messages"])],
        )
        message = answer.choices[0].message
        usage = answer.usage
        await self.compactor.append_messages(
            key,
            from_openai([message]),
            finalize=True,
            usage={"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens} if usage else None,
        )
        return Reply(reply=message.content or "", context_tokens=context["tokens"])


def create_app(chat: Chat) -> FastAPI:
    app = FastAPI(title="compactor chat example")

    @app.post("/conversations/{conversation}/messages")
    async def post(conversation: str, said: Said) -> Reply:
        try:
            return await chat.turn(conversation, said.text)
        except ApiError as error:
            raise HTTPException(status_code=400 if error.status < 500 else 502, detail=str(error)) from error

    return app


def from_environment() -> FastAPI:
    return create_app(
        Chat(
            compactor=AsyncCompactor(os.environ.get("COMPACTOR_URL", "http://127.0.0.1:9464"), token=os.environ.get("COMPACTOR_TOKEN")),
            openai=AsyncOpenAI(),
            model=os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"),
            domain="chat",
            system="You are a helpful assistant.",
        )
    )

