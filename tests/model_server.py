"""A local OpenAI-compatible server that tests script, reached by the real ``openai`` client.

Each request to ``/v1/chat/completions`` takes the next scripted reply:
``answer("text")``, ``tool_calls(("notes_search", {"query": "x"}), ...)``,
``error(500)``, each with an optional ``delay`` in seconds. The bodies it
received are kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def answer(content: str, *, delay: float = 0, usage: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"content": content, "delay": delay, "usage": usage, **extra}


def tool_calls(*calls: tuple[str, Any] | tuple[str, Any, str], content: str = "", delay: float = 0) -> dict[str, Any]:
    built = []
    for call in calls:
        name, args = call[0], call[1]
        call_id = call[2] if len(call) > 2 else f"call_{uuid.uuid4().hex[:8]}"
        built.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
        )
    return {"content": content, "tool_calls": built, "delay": delay}


def error(status: int, *, delay: float = 0, message: str = "scripted failure") -> dict[str, Any]:
    return {"status": status, "delay": delay, "message": message}


class ScriptedModelServer:
    def __init__(self) -> None:
        self.script: deque[dict[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.received = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                server.headers.append(dict(self.headers))
                server.received.set()
                reply = server.script.popleft() if server.script else answer("ok")
                if reply.get("delay"):
                    time.sleep(reply["delay"])
                if "status" in reply:
                    self._send(reply["status"], {"error": {"message": reply["message"], "type": "scripted"}})
                    return
                self._send(200, server.completion(reply, body))

            def _send(self, status: int, payload: Any) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def push(self, *replies: dict[str, Any]) -> None:
        self.script.extend(replies)

    def completion(self, reply: dict[str, Any], body: dict[str, Any]) -> Any:
        if reply.get("raw") is not None:
            return reply["raw"]
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content") or None}
        if reply.get("tool_calls"):
            message["tool_calls"] = reply["tool_calls"]
        usage = reply.get("usage") or {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted-model"),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop"}
            ],
            "usage": usage,
        }
