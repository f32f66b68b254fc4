"""A fake model provider on loopback for the proxy's SDK tests: OpenAI
Chat Completions and Anthropic Messages, whole or streamed, with a tool
call when the user asks for the weather, a 429 for the model
`rate-limited`, and a 400 "context length exceeded" for a model named
`small-window…` sent more than 6,000 characters of messages. It records every request it receives; GET /requests
answers them (bodies and headers) and DELETE /requests forgets them.

`python upstream.py` listens on a free loopback port and prints its URL as
its first line. Standard library only.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RECORDED: list = []
LOCK = threading.Lock()


def last_user_text(messages: list) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
            return ""
    return ""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def send_json(self, status: int, body: object, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events: list) -> None:
        data = "".join(events).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/requests":
            with LOCK:
                self.send_json(200, RECORDED)
        elif self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        else:
            self.send_json(404, {"error": {"message": "no such route"}})

    def do_DELETE(self) -> None:
        with LOCK:
            RECORDED.clear()
        self.send_json(200, {})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        with LOCK:
            RECORDED.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
        if body.get("model") == "rate-limited":
            self.send_json(429, {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}},
                           {"retry-after": "7", "x-ratelimit-remaining-requests": "0"})
            return
        messages = body.get("messages", [])
        # A model smaller than the worker was told: it refuses what is over
        # 6,000 characters of messages.
        if body.get("model", "").startswith("small-window") and len(json.dumps(messages)) > 6000:
            self.send_json(400, {"error": {"message": "This model's maximum context length is 2000 tokens.",
                                           "type": "invalid_request_error", "code": "context_length_exceeded"}})
            return
        weather = "weather" in last_user_text(messages) and messages[-1].get("role") == "user" \
            and isinstance(messages[-1].get("content"), str)
        n = len(messages)
        if self.path.startswith("/v1/chat/completions"):
            self.openai(body, n, weather)
        elif self.path.startswith("/v1/messages"):
            self.anthropic(body, n, weather)
        else:
            self.send_json(404, {"error": {"message": "no such route"}})

    def openai(self, body: dict, n: int, weather: bool) -> None:
        if weather:
            message = {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{n}", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}
        else:
            message = {"role": "assistant", "content": f"Answer to request with {n} messages.", "refusal": None}
        if not body.get("stream"):
            self.send_json(200, {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0,
                                 "model": body.get("model"), "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if weather else "stop"}],
                                 "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}})
            return

        def chunk(delta: dict, finish: str | None = None) -> str:
            return "data: " + json.dumps({"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 0,
                                          "model": body.get("model"),
                                          "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"
        events = [chunk({"role": "assistant", "content": ""})]
        if message["content"]:
            events += [chunk({"content": p}) for p in split_keep(message["content"])]
        for i, call in enumerate(message.get("tool_calls") or []):
            events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                                 "function": {"name": call["function"]["name"], "arguments": ""}}]}))
            events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]}))
        events.append(chunk({}, "tool_calls" if weather else "stop"))
        events.append("data: [DONE]\n\n")
        self.send_events(events)

    def anthropic(self, body: dict, n: int, weather: bool) -> None:
        if weather:
            content = [{"type": "text", "text": "Let me check."},
                       {"type": "tool_use", "id": f"toolu_{n}", "name": "get_weather", "input": {"city": "Oslo"}}]
        else:
            content = [{"type": "text", "text": f"Answer to request with {n} messages."}]
        stop = "tool_use" if weather else "end_turn"
        if not body.get("stream"):
            self.send_json(200, {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model"),
                                 "content": content, "stop_reason": stop, "stop_sequence": None,
                                 "usage": {"input_tokens": 10, "output_tokens": 10}})
            return

        def event(name: str, data: dict) -> str:
            return f"event: {name}\ndata: {json.dumps(data)}\n\n"
        events = [event("message_start", {"type": "message_start", "message": {
            "id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model"), "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})]
        for i, block in enumerate(content):
            if block["type"] == "text":
                events.append(event("content_block_start", {"type": "content_block_start", "index": i,
                                                            "content_block": {"type": "text", "text": ""}}))
                for piece in split_keep(block["text"]):
                    events.append(event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                                "delta": {"type": "text_delta", "text": piece}}))
            else:
                events.append(event("content_block_start", {"type": "content_block_start", "index": i,
                                    "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
                events.append(event("content_block_delta", {"type": "content_block_delta", "index": i,
                                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
            events.append(event("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                               "usage": {"output_tokens": 10}}))
        events.append(event("message_stop", {"type": "message_stop"}))
        self.send_events(events)


def split_keep(text: str) -> list:
    """`text` in word-sized pieces that join back to it."""
    pieces, start = [], 0
    for i, ch in enumerate(text):
        if ch == " ":
            pieces.append(text[start:i + 1])
            start = i + 1
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
