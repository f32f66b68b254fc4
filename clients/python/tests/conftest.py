"""What the tests share: the live worker they talk to, unique names, and
small HTTP servers on loopback (a fake model provider, a proxy in front of
the worker that misbehaves on purpose)."""

from __future__ import annotations

import os
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import httpx
import pytest

from compactor_client import Compactor, Retry, Workstream


@dataclass
class Worker:
    url: str
    token: str


@pytest.fixture(scope="session")
def worker() -> Worker:
    """The live worker tests/clients/run starts (on PostgreSQL and Redis, with
    a bearer token). Without it the live tests fail: they are not skipped."""
    url = os.environ.get("COMPACTOR_URL")
    token = os.environ.get("COMPACTOR_TOKEN")
    if not url or not token:
        raise RuntimeError("COMPACTOR_URL and COMPACTOR_TOKEN name the live worker: run the tests with tests/clients/run")
    return Worker(url, token)


@pytest.fixture
def api(worker: Worker) -> Iterator[Compactor]:
    with Compactor(worker.url, token=worker.token, retry=Retry(base_delay=0.02)) as client:
        yield client


def unique(prefix: str) -> str:
    """A name no other test or run uses (a domain: a letter, then `a-z 0-9`)."""
    return f"{prefix}{secrets.token_hex(6)}"


def workstream() -> Workstream:
    return Workstream(unique("py"), unique("conv-"))


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    #: Close the connection without answering.
    drop: bool = False


@dataclass
class Server:
    url: str
    requests: list[Recorded]
    close: Callable[[], None]


def serve(handle: Callable[[Recorded], Answer | None]) -> Server:
    """An HTTP server on a free loopback port; `handle` answers each request
    (None: never answer, until the server closes)."""
    requests: list[Recorded] = []
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            return

        def _any(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            recorded = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length))
            requests.append(recorded)
            answer = handle(recorded)
            if answer is None:
                stop.wait(30)
                self.close_connection = True
                return
            if answer.drop:
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(name, value)
            self.send_header("content-length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        do_GET = _any
        do_POST = _any

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def close() -> None:
        stop.set()
        server.shutdown()
        server.server_close()

    return Server(f"http://127.0.0.1:{server.server_address[1]}", requests, close)


def forward(target: str, request: Recorded) -> Answer:
    """Sends a recorded request on to `target`; its answer."""
    headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
    answer = httpx.request(request.method, f"{target}{request.path}", headers=headers, content=request.body, timeout=60)
    return Answer(answer.status_code, {"content-type": answer.headers.get("content-type", "application/json")}, answer.content)


def json_answer(status: int, body: Any, headers: dict[str, str] | None = None) -> Answer:
    import json

    return Answer(status, {"content-type": "application/json", **(headers or {})}, json.dumps(body).encode())
