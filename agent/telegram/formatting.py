"""What the assistant says, as Telegram messages: Markdown rendered to Telegram's small HTML subset,
cut into messages Telegram takes, and cards and notices worded for a chat.

Telegram shows only ``b``, ``i``, ``s``, ``u``, ``code``, ``pre``, ``a`` and ``blockquote``; everything
else of the model's Markdown becomes plain text around them (a list's bullets, a heading in bold).
The source's own HTML is text, escaped, like everything the model wrote; a link goes out only when
it is http(s).
"""

from __future__ import annotations

import html
import re
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from .. import notices
from ..step_labels import confirmation_fields, tool_title
from .bot import MESSAGE_LIMIT

_markdown = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).disable("image")

_INLINE_TAGS = {"strong": "b", "em": "i", "s": "s"}
_TAG = re.compile(r"<[^>]+>")


def escape(text: str) -> str:
    """Text for Telegram's HTML: only ``&``, ``<`` and ``>`` need it."""
    return html.escape(text, quote=False)


def length(message_html: str) -> int:
    """How long Telegram counts a message: its text after the tags, in UTF-16 code units."""
    return len(html.unescape(_TAG.sub("", message_html)).encode("utf-16-le")) // 2


def messages(markdown: str) -> list[str]:
    """The answer as Telegram messages, each within ``MESSAGE_LIMIT``; its blocks whole where they fit."""
    blocks = [block for block in _blocks(markdown) if block.strip()]
    packed: list[str] = []
    for block in blocks:
        for piece in _fitting(block):
            if packed and length(packed[-1]) + 2 + length(piece) <= MESSAGE_LIMIT:
                packed[-1] += "\n\n" + piece
            else:
                packed.append(piece)
    return packed


def card_text(tool_name: str, preview: Any, status: str | None = None) -> str:
    """A card as a message: the tool's title, its fields (an update's old value before the new), and,
    once decided, its outcome."""
    lines = [f"<b>{escape(tool_title(tool_name))}</b>"]
    for row in confirmation_fields(tool_name, preview):
        value = escape(str(row.get("value") or ""))
        if row.get("old"):
            value = f"<s>{escape(str(row['old']))}</s> → {value}"
        label = escape(str(row.get("label") or ""))
        lines.append(f"{label}: {value}" if label else value)
    if status is not None:
        lines.append("")
        lines.append(f"<i>{escape(notices.text(f'confirmation_{status}', {'tool': tool_title(tool_name)}))}</i>")
    return _cut("\n".join(lines))


def notice_text(code: str, params: dict[str, Any]) -> str:
    """A notice, as the page words it, in italics."""
    shown = dict(params)
    if "tool" in shown:
        shown["tool"] = tool_title(shown["tool"])
    return f"<i>{escape(notices.text(code, shown))}</i>"


def _cut(message_html: str) -> str:
    """A message of ours that Telegram would refuse as too long, shortened as plain text."""
    if length(message_html) <= MESSAGE_LIMIT:
        return message_html
    return escape(html.unescape(_TAG.sub("", message_html))[: MESSAGE_LIMIT - 1]) + "…"


def _blocks(markdown: str) -> list[str]:
    """Each top-level block of the Markdown, rendered."""
    tokens = _markdown.parse(markdown or "")
    blocks: list[str] = []
    depth, start = 0, 0
    for index, token in enumerate(tokens):
        depth += token.nesting
        if depth == 0:
            blocks.append(_render(tokens[start : index + 1]))
            start = index + 1
    return blocks


def _render(tokens: list[Token]) -> str:
    out: list[str] = []
    lists: list[list[int]] = []  # for each open list: [next number] (ordered) or [] (bullets)
    for token in tokens:
        kind = token.type
        if kind == "inline":
            out.append(_inline(token.children or []))
        elif kind == "heading_open":
            out.append("<b>")
        elif kind == "heading_close":
            out.append("</b>\n")
        elif kind == "paragraph_close" and not token.hidden:
            out.append("\n")
        elif kind in ("bullet_list_open", "ordered_list_open"):
            if lists and out and not out[-1].endswith("\n"):
                out.append("\n")  # a list inside an item starts on a line of its own
            lists.append([int(token.attrGet("start") or 1)] if kind == "ordered_list_open" else [])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif kind == "list_item_open":
            marker = lists[-1] if lists else []
            bullet = f"{marker[0]}." if marker else "•"
            if marker:
                marker[0] += 1
            out.append("  " * (len(lists) - 1) + bullet + " ")
        elif kind == "list_item_close" and out and not out[-1].endswith("\n"):
            out.append("\n")
        elif kind == "blockquote_open":
            out.append("<blockquote>")
        elif kind == "blockquote_close":
            out.append("</blockquote>\n")
        elif kind in ("fence", "code_block"):
            language = (token.info or "").strip().split(" ")[0]
            attribute = f' class="language-{escape(language)}"' if re.fullmatch(r"[\w+#.-]+", language) else ""
            out.append(f"<pre><code{attribute}>{escape(token.content.rstrip())}</code></pre>\n")
        elif kind == "hr":
            out.append("———\n")
        elif kind in ("tr_close",):
            out.append("\n")
        elif kind in ("th_close", "td_close"):
            out.append(" | ")
    text = "".join(out)
    text = re.sub(r" \| \n", "\n", text).replace("\n</blockquote>", "</blockquote>")
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _inline(children: list[Token]) -> str:
    out: list[str] = []
    links: list[bool] = []  # for each open link: whether it was shown as one
    for token in children:
        kind = token.type
        if kind == "text":
            out.append(escape(token.content))
        elif kind == "code_inline":
            out.append(f"<code>{escape(token.content)}</code>")
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind.endswith("_open") and kind[:-5] in _INLINE_TAGS:
            out.append(f"<{_INLINE_TAGS[kind[:-5]]}>")
        elif kind.endswith("_close") and kind[:-6] in _INLINE_TAGS:
            out.append(f"</{_INLINE_TAGS[kind[:-6]]}>")
        elif kind == "link_open":
            href = str(token.attrGet("href") or "")
            links.append(href.lower().startswith(("http://", "https://")))
            out.append(f'<a href="{html.escape(href)}">' if links[-1] else "")
        elif kind == "link_close":
            out.append("</a>" if links and links.pop() else "")
        else:
            out.append(escape(token.content))
    return "".join(out)


def _fitting(block: str) -> list[str]:
    """A block as pieces Telegram takes: whole when it fits, else cut as plain text at a line or word."""
    if length(block) <= MESSAGE_LIMIT:
        return [block]
    plain = html.unescape(_TAG.sub("", block))
    pieces: list[str] = []
    while plain:
        limit = MESSAGE_LIMIT
        cut = _cut_at(plain, limit)
        while length(escape(plain[:cut])) > MESSAGE_LIMIT:  # characters Telegram counts twice (emoji)
            limit -= MESSAGE_LIMIT // 8
            cut = _cut_at(plain, limit)
        pieces.append(escape(plain[:cut].rstrip()))
        plain = plain[cut:].lstrip()
    return pieces


def _cut_at(text: str, limit: int) -> int:
    """Where to end a piece of at most ``limit`` characters: the last line break, else space, before it."""
    if len(text) <= limit:
        return len(text)
    for separator in ("\n", " "):
        found = text.rfind(separator, limit // 2, limit)
        if found > 0:
            return found + 1
    return limit
