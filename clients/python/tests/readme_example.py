import os

from openai import OpenAI

from compactor_client import Compactor, Workstream, from_openai, to_openai

compactor = Compactor("http://127.0.0.1:9464", token=os.environ.get("COMPACTOR_TOKEN"))
openai = OpenAI()
chat = Workstream("chat", "conversation-42")


def reply(user_text: str) -> str:
    compactor.append_messages(chat, [{"role": "user", "parts": [{"type": "text", "text": user_text}]}])
    compactor.wait_until_ready(chat, wait=5.0)  # a compaction under way, bounded
    context = compactor.build_context(chat)  # summary + state + recent tail
    answer = openai.chat.completions.create(model="gpt-4.1-mini", messages=to_openai(context["messages"]))
    message = answer.choices[0].message
    compactor.append_messages(chat, from_openai([message]), finalize=True)
    return message.content or ""
