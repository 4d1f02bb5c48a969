"""A fake Telegram Bot API on loopback, for python-telegram-bot's ``base_url``: never the real one.

It keeps the chats' messages as Telegram would (ids, text, buttons, edits, deletions), answers the
methods the app calls, and lets a test play the user: ``says`` (a text, a command), ``sends_voice``,
``sends_document``, ``presses`` (a button) make updates, which ``getUpdates`` hands out (long polling,
with a second reader refused 409 as Telegram refuses it) or a test posts to the webhook itself
(``update`` builds the body). ``limit`` makes a method answer 429 with ``retry_after``. Every call is
kept in ``calls`` with the time it came.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote

TOKEN = "123456:TEST-token"
BOT = {"id": 123456, "is_bot": True, "first_name": "Assistant", "username": "agent_test_bot"}


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float
    refused: bool = False  # answered 429


@dataclass
class Sent:
    """A message the bot sent, as the chat shows it now."""

    chat_id: int
    message_id: int
    text: str
    buttons: list[list[dict[str, Any]]] = field(default_factory=list)
    edits: list[float] = field(default_factory=list)  # when each edit came
    sent_at: float = 0.0
    deleted: bool = False


class FakeBotApi:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.messages: dict[tuple[int, int], Sent] = {}
        self.updates: list[dict[str, Any]] = []
        self.files: dict[str, bytes] = {}  # path -> bytes
        self.file_paths: dict[str, str] = {}  # file id -> path
        self.limits: dict[str, list[int]] = {}
        self.answers: list[dict[str, Any]] = []  # answerCallbackQuery's
        self.webhook: dict[str, Any] | None = None
        self.polling_now = 0
        self.most_polling_at_once = 0
        self.conflicts = 0
        self._ids = itertools.count(1)
        self._update_ids = itertools.count(1000)
        self._changed = threading.Condition()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                prefix, path = f"/file/bot{TOKEN}/", unquote(self.path)  # the library quotes the token's colon
                data = api.files.get(path[len(prefix) :]) if path.startswith(prefix) else None
                if data is None:
                    self._send(404, b"not found", "text/plain")
                else:
                    self._send(200, data, "application/octet-stream")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode()
                prefix = f"/bot{TOKEN}/"
                if not self.path.startswith(prefix):
                    self._reply({"ok": False, "error_code": 401, "description": "Unauthorized"}, 401)
                    return
                method = self.path[len(prefix) :]
                params = _params(raw, self.headers.get("Content-Type") or "")
                api.calls.append(Call(method, params, time.monotonic()))
                limited = api.limits.get(method)
                if limited:
                    api.calls[-1].refused = True
                    retry_after = limited.pop(0)
                    body = {
                        "ok": False,
                        "error_code": 429,
                        "description": f"Too Many Requests: retry after {retry_after}",
                        "parameters": {"retry_after": retry_after},
                    }
                    self._reply(body, 429)
                    return
                status, body = api.answer(method, params)
                self._reply(body, status)

            def _reply(self, body: Any, status: int) -> None:
                self._send(status, json.dumps(body).encode(), "application/json")

            def _send(self, status: int, data: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def settings(self, **overrides: Any) -> dict[str, Any]:
        """``AGENT["TELEGRAM"]`` for a site that talks to this server."""
        return {
            "TOKEN": TOKEN,
            "MODE": "polling",
            "BOT_USERNAME": BOT["username"],
            "BASE_URL": self.base_url,
            **overrides,
        }

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- the user's side ---------------------------------------------------------------------------

    def update(self, **content: Any) -> dict[str, Any]:
        """A new update with ``content`` (``message=...`` or ``callback_query=...``), queued for readers."""
        body = {"update_id": next(self._update_ids), **content}
        with self._changed:
            self.updates.append(body)
            self._changed.notify_all()
        return body

    def says(self, chat_id: int, text: str, *, language: str = "en", chat_type: str = "private") -> dict[str, Any]:
        return self.update(message=self._message(chat_id, language, chat_type, text=text))

    def sends_voice(self, chat_id: int, audio: bytes, *, duration: int, language: str = "en") -> dict[str, Any]:
        file_id = self._file(audio, "voice/note.oga")
        voice = {"file_id": file_id, "file_unique_id": file_id, "duration": duration, "file_size": len(audio)}
        return self.update(message=self._message(chat_id, language, "private", voice=voice))

    def sends_document(
        self, chat_id: int, data: bytes, name: str, *, caption: str = "", language: str = "en"
    ) -> dict[str, Any]:
        file_id = self._file(data, f"documents/{name}")
        document = {"file_id": file_id, "file_unique_id": file_id, "file_name": name, "file_size": len(data)}
        extra = {"caption": caption} if caption else {}
        return self.update(message=self._message(chat_id, language, "private", document=document, **extra))

    def presses(self, chat_id: int, message_id: int, data: str, *, language: str = "en") -> dict[str, Any]:
        sent = self.messages[(chat_id, message_id)]
        query = {
            "id": str(next(self._ids)),
            "from": _person(chat_id, language),
            "chat_instance": str(chat_id),
            "data": data,
            "message": self._as_message(sent),
        }
        return self.update(callback_query=query)

    def button(self, sent: Sent, label: str) -> str:
        """The callback data of the button labelled ``label``."""
        return next(b["callback_data"] for row in sent.buttons for b in row if b["text"] == label)

    def limit(self, method: str, retry_after: int, times: int = 1) -> None:
        self.limits.setdefault(method, []).extend([retry_after] * times)

    # -- what the bot did --------------------------------------------------------------------------

    def chat(self, chat_id: int) -> list[Sent]:
        """The chat's messages from the bot, oldest first, without deleted ones."""
        return [m for (chat, _id), m in sorted(self.messages.items()) if chat == chat_id and not m.deleted]

    def texts(self, chat_id: int) -> list[str]:
        return [m.text for m in self.chat(chat_id)]

    def called(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    # -- the Bot API -------------------------------------------------------------------------------

    def answer(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return 404, {"ok": False, "error_code": 404, "description": "Not Found: method not found"}
        try:
            return 200, {"ok": True, "result": handler(params)}
        except ApiRefusal as refusal:
            return refusal.status, {"ok": False, "error_code": refusal.status, "description": refusal.description}

    def _api_getMe(self, params: dict[str, Any]) -> Any:
        return BOT

    def _api_sendMessage(self, params: dict[str, Any]) -> Any:
        chat_id = int(params["chat_id"])
        sent = Sent(chat_id, next(self._ids), params["text"], _buttons(params), sent_at=time.monotonic())
        self.messages[(chat_id, sent.message_id)] = sent
        return self._as_message(sent)

    def _api_editMessageText(self, params: dict[str, Any]) -> Any:
        sent = self.messages.get((int(params["chat_id"]), int(params["message_id"])))
        if sent is None or sent.deleted:
            raise ApiRefusal(400, "Bad Request: message to edit not found")
        buttons = _buttons(params)
        if sent.text == params["text"] and sent.buttons == buttons:
            raise ApiRefusal(400, "Bad Request: message is not modified")
        sent.text, sent.buttons = params["text"], buttons
        sent.edits.append(time.monotonic())
        return self._as_message(sent)

    def _api_deleteMessage(self, params: dict[str, Any]) -> Any:
        sent = self.messages.get((int(params["chat_id"]), int(params["message_id"])))
        if sent is None or sent.deleted:
            raise ApiRefusal(400, "Bad Request: message to delete not found")
        sent.deleted = True
        return True

    def _api_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        self.answers.append(params)
        return True

    def _api_sendChatAction(self, params: dict[str, Any]) -> Any:
        return True

    def _api_getFile(self, params: dict[str, Any]) -> Any:
        file_id = params["file_id"]
        path = self.file_paths.get(file_id)
        if path is None:
            raise ApiRefusal(400, "Bad Request: invalid file_id")
        return {"file_id": file_id, "file_unique_id": file_id, "file_size": len(self.files[path]), "file_path": path}

    def _api_setWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = params
        return True

    def _api_deleteWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = None
        return True

    def _api_getUpdates(self, params: dict[str, Any]) -> Any:
        if self.webhook is not None:
            raise ApiRefusal(409, "Conflict: can't use getUpdates method while webhook is active")
        with self._changed:
            if self.polling_now:
                self.conflicts += 1
                raise ApiRefusal(409, "Conflict: terminated by other getUpdates request")
            self.polling_now += 1
            self.most_polling_at_once = max(self.most_polling_at_once, self.polling_now)
        try:
            offset = int(params.get("offset") or 0)
            deadline = time.monotonic() + min(float(params.get("timeout") or 0), 2.0)
            with self._changed:
                while True:
                    ready = [u for u in self.updates if u["update_id"] >= offset]
                    left = deadline - time.monotonic()
                    if ready or left <= 0:
                        return ready
                    self._changed.wait(left)
        finally:
            with self._changed:
                self.polling_now -= 1

    # -- shapes ------------------------------------------------------------------------------------

    def _file(self, data: bytes, path: str) -> str:
        """Keep a file the user sends; its id (``getFile`` gives its path, the path its bytes)."""
        file_id = f"file{next(self._ids)}"
        self.file_paths[file_id] = f"{file_id}/{path}"
        self.files[self.file_paths[file_id]] = data
        return file_id

    def _message(self, chat_id: int, language: str, chat_type: str, **content: Any) -> dict[str, Any]:
        chat = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = "Ann"
        return {
            "message_id": next(self._ids),
            "date": int(time.time()),
            "chat": chat,
            "from": _person(chat_id, language),
            **content,
        }

    def _as_message(self, sent: Sent) -> dict[str, Any]:
        message: dict[str, Any] = {
            "message_id": sent.message_id,
            "date": int(time.time()),
            "chat": {"id": sent.chat_id, "type": "private", "first_name": "Ann"},
            "from": BOT,
            "text": sent.text,
        }
        if sent.buttons:
            message["reply_markup"] = {"inline_keyboard": sent.buttons}
        return message


class ApiRefusal(Exception):
    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.description = description


def _person(chat_id: int, language: str) -> dict[str, Any]:
    return {"id": chat_id, "is_bot": False, "first_name": "Ann", "language_code": language}


def _params(raw: str, content_type: str) -> dict[str, Any]:
    """The call's parameters: python-telegram-bot posts a form whose complex values are JSON."""
    if "json" in content_type:
        return dict(json.loads(raw or "{}"))
    params: dict[str, Any] = {}
    for key, value in parse_qsl(raw, keep_blank_values=True):
        if value[:1] in ("{", "["):
            try:
                params[key] = json.loads(value)
                continue
            except ValueError:
                pass
        params[key] = value
    return params


def _buttons(params: dict[str, Any]) -> list[list[dict[str, Any]]]:
    markup = params.get("reply_markup") or {}
    return list(markup.get("inline_keyboard") or []) if isinstance(markup, dict) else []
