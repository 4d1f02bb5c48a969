"""Model and tool text rendered from Markdown to safe HTML for the page.

Raw HTML in the source is escaped, links are limited to http(s), mailto and
this site's own paths, and images are not rendered (an external image would
leak the reader's IP and break the page's Content-Security-Policy). Tables
render; fenced code is highlighted here by Pygments into CSS classes (never
inline styles, which the strict CSP would block).
"""

from __future__ import annotations

import functools
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from .. import notices
from ..step_labels import confirmation_fields, tool_title

_SAFE_SCHEMES = ("http://", "https://", "mailto:")


def _validate_link(url: str) -> bool:
    lowered = url.strip().lower()
    return lowered.startswith(_SAFE_SCHEMES) or lowered.startswith(("#", "/")) and not lowered.startswith("//")


def _build() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False, "highlight": _highlight})
    md.enable("table")
    md.disable("image")
    md.validateLink = _validate_link  # type: ignore[method-assign]  # the documented hook
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("th_open", _cell_open)
    md.add_render_rule("td_open", _cell_open)
    return md


def _cell_open(self: RendererHTML, tokens: list[Any], idx: int, options: Any, env: Any) -> str:
    """A column's alignment as a class: markdown-it writes a ``style`` the CSP would refuse."""
    token = tokens[idx]
    style = token.attrGet("style") or ""
    if style:
        token.attrs.pop("style", None)
        token.attrSet("class", "align-" + style.rpartition(":")[2].strip())
    return self.renderToken(tokens, idx, options, env)


def _link_open(self: RendererHTML, tokens: list[Any], idx: int, options: Any, env: Any) -> str:
    tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
    tokens[idx].attrSet("target", "_blank")
    return self.renderToken(tokens, idx, options, env)


HIGHLIGHT_MAX_CHARS = 20_000
"""Longer code is shown plain: highlighting is for reading, not worth seconds of a request."""

_formatter = HtmlFormatter(nowrap=True, classprefix="hl-")


def _highlight(code: str, lang: str, attrs: str) -> str:
    """A fenced block as ``<pre class="code-block">``: its language's tokens as classes, else plain.

    markdown-it escapes what this returns only when it is empty, so every path escapes.
    """
    name = (lang or "").strip().split()[0] if lang else ""
    body = ""
    if name and len(code) <= HIGHLIGHT_MAX_CHARS:
        try:
            body = highlight(code, get_lexer_by_name(name, stripnl=False, ensurenl=False), _formatter)
        except ClassNotFound:
            body = ""
    if not body:
        body = escapeHtml(code)
    language = f' data-language="{escapeHtml(name)}"' if name else ""
    return f'<pre class="code-block"{language}><code class="highlight">{body}</code></pre>\n'


_markdown = _build()


def render_markdown(text: str) -> str:
    """Safe HTML for a model's answer."""
    html: str = _markdown.render(text or "")  # the HTML renderer's
    return html


@functools.lru_cache(maxsize=64)
def draft_html(text: str) -> str:
    """An answer's draft as the stored answer will look: the same safe rules.

    Every open tab of a chat gets the same draft, so each text is rendered once per process.
    """
    return render_markdown(text)


def page_view(view: dict[str, Any]) -> dict[str, Any]:
    """A client view with what the page shows for it: an answer's HTML, a notice's text, a tool's
    title and a card's labelled fields.

    Every phrase is in the active language, so call this under the user's.
    """
    role = view.get("role")
    if role == "assistant":
        return {**view, "html": render_markdown(view.get("content") or "")}
    if role == "notice":
        params = dict(view.get("notice_params") or {})
        if "tool" in params:
            params["tool"] = tool_title(params["tool"])
        code = view.get("notice_code") or ""
        shown = {**view, "notice_text": notices.text(code, params), "notice_tone": notices.tone(code)}
        confirmation = view.get("confirmation")
        if confirmation and "preview" in confirmation:  # an edited card's outcome: its rows as it ran, for every tab
            tool = (view.get("notice_params") or {}).get("tool")
            shown["confirmation"] = {**confirmation, "fields": confirmation_fields(tool, confirmation["preview"])}
        return shown
    if role == "tool":
        shown = {**view, "tool_title": tool_title(view.get("tool_name"))}
        confirmation = view.get("confirmation")
        if confirmation and "preview" in confirmation:
            shown["confirmation"] = {
                **confirmation,
                "fields": confirmation_fields(view.get("tool_name"), confirmation["preview"]),
            }
        return shown
    return view
