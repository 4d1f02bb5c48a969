"""A local OpenAI-compatible server that tests script, reached by the real ``openai`` client.

Each request to ``/v1/chat/completions`` takes the next scripted reply:
``answer("text")``, ``tool_calls(("notes_search", {"query": "x"}), ...)``,
``error(500)``, each with an optional ``delay`` in seconds. The bodies it
received are kept in ``requests``.

A request with ``stream: true`` gets its reply as server-sent events, a
chunk per word (or the reply's ``chunks``), ``chunk_delay`` seconds apart;
``pauses={n: seconds}`` holds the stream still that long after its chunk
``n`` (a model thinking mid-answer); ``cut=True`` breaks the connection off
after them, before the finish;
``unfinished=True`` ends the body cleanly with no finish at all;
``linger`` holds the body open that many seconds after ``[DONE]``. Events
are JSON as many servers write it, with non-ASCII text unescaped. The time
each chunk was written is kept in ``chunk_times``; ``connections`` counts
the connections clients opened.

A request to ``/v1/audio/transcriptions`` (multipart, as the SDK sends it) takes the next of
``transcripts``: ``transcript("words", seconds=3)`` or ``error(...)``; what it received (the file's
name and bytes, the model) is kept in ``recordings``.

A reply's text may carry ``NONCE``: the server puts in its place the
off-purpose nonce of the request's system prompt, as a model that obeys the
prompt would (``off_purpose("reason")`` writes the whole marker).
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import re
import threading
import time
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NONCE = "⟪nonce⟫"
PROMPT_NONCE = re.compile(r"⟦off_purpose: (\S+) <reason>⟧")


def off_purpose(reason: str) -> str:
    """The off-purpose marker with the turn's nonce, as the system prompt asks for it."""
    return f"⟦off_purpose: {NONCE} {reason}⟧"


def prompt_nonce(body: dict[str, Any]) -> str:
    """The nonce the request's system prompt gives for the marker ("" when it gives none)."""
    for message in body.get("messages") or []:
        if message.get("role") == "system":
            found = PROMPT_NONCE.search(message.get("content") or "")
            if found:
                return found.group(1)
    return ""


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


def transcript(text: str, *, seconds: float | None = None) -> dict[str, Any]:
    """A transcription's answer; with ``seconds``, the length the server counted (OpenAI's ``usage``)."""
    return {"text": text, "seconds": seconds}


def error(status: int, *, delay: float = 0, message: str = "scripted failure") -> dict[str, Any]:
    return {"status": status, "delay": delay, "message": message}


class ScriptedModelServer:
    def __init__(self) -> None:
        self.script: deque[dict[str, Any]] = deque()
        self.transcripts: deque[dict[str, Any]] = deque()
        self.recordings: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.received = threading.Event()
        self.chunk_times: list[float] = []
        self.connections = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms wait between them

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                server.connections += 1

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if self.path.endswith("/audio/transcriptions"):
                    self._transcribe(self.rfile.read(length))
                    return
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                server.headers.append(dict(self.headers))
                server.received.set()
                reply = server.script.popleft() if server.script else answer("ok")
                if NONCE in (reply.get("content") or ""):
                    reply = {**reply, "content": reply["content"].replace(NONCE, prompt_nonce(body))}
                if reply.get("delay"):
                    time.sleep(reply["delay"])
                if "status" in reply:
                    self._send(reply["status"], {"error": {"message": reply["message"], "type": "scripted"}})
                    return
                if body.get("stream") and reply.get("raw") is None:
                    try:
                        self._stream(reply, body)
                    except (BrokenPipeError, ConnectionResetError):
                        self.close_connection = True  # the client stopped reading (a stopped turn)
                    return
                self._send(200, server.completion(reply, body))

            def _transcribe(self, raw: bytes) -> None:
                form = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                    b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + raw
                )
                fields = {part.get_param("name", header="content-disposition"): part for part in form.iter_parts()}
                audio = fields["file"]
                server.recordings.append(
                    {
                        "name": audio.get_filename(),
                        "audio": audio.get_payload(decode=True),
                        "model": fields["model"].get_payload(decode=True).decode(),
                    }
                )
                reply = server.transcripts.popleft() if server.transcripts else transcript("")
                if "status" in reply:
                    self._send(reply["status"], {"error": {"message": reply["message"], "type": "scripted"}})
                    return
                answer: dict[str, Any] = {"text": reply["text"]}
                if reply["seconds"] is not None:
                    answer["usage"] = {"type": "duration", "seconds": reply["seconds"]}
                self._send(200, answer)

            def _stream(self, reply: dict[str, Any], body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunks = server.chunks(reply, body)
                if reply.get("unfinished"):
                    chunks = [c for c in chunks if c["choices"] and not c["choices"][0]["finish_reason"]]
                last = len(chunks) - 1
                for index, chunk in enumerate(chunks):
                    if reply.get("cut") and index == last:
                        self.close_connection = True  # broken off: no finish, no end of the body
                        return
                    self._write_event(json.dumps(chunk, ensure_ascii=False))
                    server.chunk_times.append(time.monotonic())
                    if reply.get("chunk_delay") and index < last:
                        time.sleep(reply["chunk_delay"])
                    time.sleep((reply.get("pauses") or {}).get(index, 0))
                if not reply.get("unfinished"):
                    self._write_event("[DONE]")
                time.sleep(reply.get("linger") or 0)
                self.wfile.write(b"0\r\n\r\n")

            def _write_event(self, data: str) -> None:
                event = f"data: {data}\n\n".encode()
                self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                self.wfile.flush()

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

    def chunks(self, reply: dict[str, Any], body: dict[str, Any]) -> list[dict[str, Any]]:
        """The reply as stream chunks: its text in pieces, each tool call's arguments in two, the finish, the usage."""
        pieces = reply.get("chunks") or re.findall(r"\s*\S+", reply.get("content") or "")
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": piece} for piece in pieces]
        for index, call in enumerate(reply.get("tool_calls") or []):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            name = call["function"]["name"]
            first = {"index": index, "id": call["id"], "function": {"name": name, "arguments": arguments[:half]}}
            rest = {"index": index, "function": {"arguments": arguments[half:]}}
            deltas += [{"tool_calls": [first]}, {"tool_calls": [rest]}]
        finish = "tool_calls" if reply.get("tool_calls") else "stop"
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "scripted-model"),
        }
        chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas]
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = reply.get("usage") or {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
            chunks.append({**base, "choices": [], "usage": usage})
        return chunks

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
