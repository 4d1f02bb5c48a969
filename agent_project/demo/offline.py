"""The offline demo model: a deterministic stand-in served over the OpenAI HTTP API.

The demo starts it on 127.0.0.1 when no real endpoint is configured, and points
an endpoint row at it, so a demo turn goes through ``complete()`` and the real
``openai`` client like any other. It belongs to the host site, not to
``agent``, and only ever runs inside the demo command. It understands three
requests about notes, "create a note: <title>", "find notes about <words>" and
"rename my note about <words> to <title>", in English and Russian; a request for a poem, a joke or the weather
is answered as off purpose, with the marker the system prompt asks for (its
turn's nonce included); anything else gets help. Its ``/audio/transcriptions``
hears those requests spoken in English (``hearing``), where the demo's extras
are installed.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent.ai.off_purpose import MARKER_CLOSE, MARKER_OPEN, marker_example

from . import hearing

MODEL_NAME = "offline-demo"
LABEL = {"en": "_(offline demo model: no AI service is configured)_", "ru": "_(офлайн-демо: модель не подключена)_"}
CREATE = re.compile(r"\b(create|add|make|new|write|remember)\b|созда|добав|запиш|нов", re.I)
SEARCH = re.compile(r"\b(find|search|list|show|which|what)\b|найд|поиск|покаж|какие|спис", re.I)
RENAME = re.compile(
    r"\brename\b.*?\babout\s+(?P<about>.+?)\s+to\s+(?P<title>.+)$|переименуй.*?\bпро\s+(?P<ru_about>.+?)\s+в\s+(?P<ru_title>.+)$",
    re.I,
)
OFF_PURPOSE = re.compile(r"\b(poem|poetry|joke|weather)\b|стих|анекдот|шутк|погод", re.I)
PROMPT_MARKER = re.compile(re.escape(marker_example("NONCE")).replace("NONCE", r"(\S+)"))
"""The marker as the system prompt shows it: the nonce is what to copy."""


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The next assistant message for a chat, as the chat completions API shapes it."""
    names = {t.get("function", {}).get("name") for t in tools}
    user_text = _text_of(next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), ""))
    lang = "ru" if re.search(r"[а-яё]", user_text, re.I) else "en"
    last = messages[-1] if messages else {}
    files = _files(user_text)
    if files and last.get("role") == "user":
        return _text(
            _say(lang, "read") + "\n\n" + "\n".join(_file_line(name, first, lang) for name, first in files), lang
        )
    nonce, off_purpose = _marker_nonce(messages), OFF_PURPOSE.search(user_text)
    if last.get("role") == "user" and nonce and off_purpose:
        marker = f"{MARKER_OPEN} {nonce} {off_purpose.group(0).lower()}{MARKER_CLOSE}"
        return _text(_say(lang, "off_purpose"), lang, marker=marker)
    wants_create, rename = bool(CREATE.search(user_text)), RENAME.search(user_text.strip())
    if last.get("role") == "tool":
        result = _json(last.get("content"))
        found = _notes(result)
        if rename and found and "notes_update" in names:
            title = (rename.group("title") or rename.group("ru_title")).strip(" \"'«».")
            return _call("notes_update", {"pk": found[0].get("id"), "title": title}, _say(lang, "rename", title=title))
        if wants_create and "notes_create" in names:
            title = _title(user_text)
            return _call("notes_create", {"title": title, "body": ""}, _say(lang, "propose", title=title))
        return _text(_summary(result, lang), lang)
    if rename and "notes_search" in names:
        return _call("notes_search", {"search": (rename.group("about") or rename.group("ru_about")).strip()}, "")
    if (wants_create or SEARCH.search(user_text)) and "notes_search" in names:
        query = _title(user_text) if wants_create else _words(user_text)
        return _call("notes_search", {"search": query}, "")
    return _text(_say(lang, "help"), lang)


def _marker_nonce(messages: list[dict[str, Any]]) -> str:
    """The nonce the system prompt gives for the off-purpose marker ("" when it gives none)."""
    for message in messages:
        if message.get("role") == "system":
            found = PROMPT_MARKER.search(_text_of(message.get("content")))
            if found:
                return found.group(1)
    return ""


FILE_MARKER = re.compile(r"^\[[^\]:]+: ([^\]]+)\]$")


def _text_of(content: Any) -> str:
    """A message's text, whether plain or in parts (a turn with pictures sends parts)."""
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content or ""


def _files(text: str) -> list[tuple[str, str]]:
    """Each file the message carries (a ``[file: name]`` or ``[picture: name]`` line, in any language),
    with the first line of its text; a picture has none."""
    lines = text.splitlines()
    found = []
    for number, line in enumerate(lines):
        marker = FILE_MARKER.match(line.strip())
        if marker:
            following = lines[number + 1].strip() if number + 1 < len(lines) else ""
            found.append((marker.group(1), "" if FILE_MARKER.match(following) else following))
    return found


def _file_line(name: str, first: str, lang: str) -> str:
    if first:
        return f"- **{name}**: “{first[:120]}”"
    return f"- **{name}**: " + ("картинка" if lang == "ru" else "a picture")


def _say(lang: str, key: str, **params: Any) -> str:
    texts = {
        "read": {"en": "I read your files; each begins so:", "ru": "Я прочитал ваши файлы; вот их начало:"},
        "help": {
            "en": "I am the offline demo model. Try **create a note: Buy milk**, **find notes about milk** or "
            "**rename my note about milk to oat milk**.",
            "ru": "Я офлайн-демо. Попробуйте **создай заметку: Купить молоко**, **найди заметки про молоко** или "
            "**переименуй заметку про молоко в овсяное молоко**.",
        },
        "propose": {
            "en": "I will create the note **{title}** once you confirm it.",
            "ru": "Создам заметку **{title}**, когда вы подтвердите.",
        },
        "none": {"en": "I found no notes.", "ru": "Заметок не нашлось."},
        "rename": {
            "en": "I will rename the note to **{title}** once you confirm it (you can change the title on the card).",
            "ru": "Переименую заметку в **{title}**, когда вы подтвердите (название можно поправить на карточке).",
        },
        "off_purpose": {
            "en": "That is not what this assistant is for: it helps with your notes.",
            "ru": "Этот помощник не для этого: он помогает с заметками.",
        },
        "found": {"en": "I found {count} notes:", "ru": "Нашлось заметок: {count}."},
    }
    return texts[key][lang].format(**params)


def _notes(result: Any) -> list[dict[str, Any]]:
    """The notes a search answered with: the list itself, or a page's results."""
    notes = result.get("results") if isinstance(result, dict) else result
    return [n for n in notes if isinstance(n, dict)] if isinstance(notes, list) else []


def _summary(result: Any, lang: str) -> str:
    notes = _notes(result)
    if not notes:
        return _say(lang, "none")
    lines = [f"- {n.get('title', '')}" for n in notes[:10] if isinstance(n, dict)]
    return _say(lang, "found", count=len(notes)) + "\n\n" + "\n".join(lines)


def _title(text: str) -> str:
    title = (
        text.split(":", 1)[1]
        if ":" in text
        else re.sub(r"^.*?\b(note|notes|заметку|заметка|заметки)\b", "", text, count=1, flags=re.I)
    )
    return (title.strip(" \"'«».") or text.strip())[:60]


def _words(text: str) -> str:
    match = re.search(r"\b(about|with|for|про|о|об)\b\s+(.+)$", text, re.I)
    return match.group(2).strip(" ?.!") if match else ""


def _json(value: Any) -> Any:
    try:
        return json.loads(value or "null")
    except ValueError:
        return None


def _call(name: str, args: dict[str, Any], content: str) -> dict[str, Any]:
    call = {
        "id": f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
    }
    return {"role": "assistant", "content": content or None, "tool_calls": [call]}


def _text(content: str, lang: str, marker: str = "") -> dict[str, Any]:
    """An answer with the demo's label; an off-purpose marker goes last, where the prompt asks for it."""
    return {"role": "assistant", "content": f"{content}\n\n{LABEL[lang]}" + (f" {marker}" if marker else "")}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms wait between them

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if self.path.endswith("/audio/transcriptions"):
            self._transcribe(self.rfile.read(length))
            return
        body = _json(self.rfile.read(length).decode("utf-8", "replace")) or {}
        message = reply(body.get("messages") or [], body.get("tools") or [])
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        if body.get("stream"):
            try:
                self._stream(message, finish)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the turn was stopped: its worker hung up mid-answer
            return
        choice = {"index": 0, "message": message, "finish_reason": finish}
        self._answer(200, _envelope("chat.completion", choices=[choice], usage=USAGE))

    def _transcribe(self, raw: bytes) -> None:
        """Speech to text with the demo's offline recognizer (``hearing``), answered as OpenAI's API does."""
        form = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + self.headers.get("Content-Type", "").encode() + b"\r\n\r\n" + raw
        )
        audio = next(
            (
                p.get_payload(decode=True)
                for p in form.iter_parts()
                if p.get_param("name", header="content-disposition") == "file"
            ),
            None,
        )
        try:
            text, seconds = hearing.words(audio or b"")
        except Exception:  # a recording PyAV cannot read
            self._answer(
                400, {"error": {"message": "The recording could not be read.", "type": "invalid_request_error"}}
            )
            return
        self._answer(200, {"text": text, "usage": {"type": "duration", "seconds": round(seconds, 1)}})

    def _answer(self, status: int, body: Any) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, message: dict[str, Any], finish: str) -> None:
        """The answer a word at a time, as a model writes it, then the tool calls, the finish and the usage."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for word in re.findall(r"\s*\S+", message.get("content") or ""):
            self._event(_chunk({"content": word}))
            time.sleep(WORD_PAUSE_S)
        calls = [{"index": i, **call} for i, call in enumerate(message.get("tool_calls") or [])]
        if calls:
            self._event(_chunk({"tool_calls": calls}))
        self._event(_chunk({}, finish))
        self._event(_envelope("chat.completion.chunk", choices=[], usage=USAGE))
        self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")

    def _event(self, data: Any) -> None:
        event = f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()
        self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        self.wfile.flush()


USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
WORD_PAUSE_S = 0.05  # about 27 tokens a second, as a mid-size model writes: time enough to press Stop


def _envelope(kind: str, **fields: Any) -> dict[str, Any]:
    name = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    return {"id": name, "object": kind, "created": int(time.time()), "model": MODEL_NAME, **fields}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return _envelope("chat.completion.chunk", choices=[{"index": 0, "delta": delta, "finish_reason": finish}])


def serve() -> str:
    """Start the offline model on a free local port in a daemon thread; its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="agent-offline-model", daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"
