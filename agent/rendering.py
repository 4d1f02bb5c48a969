"""Model and tool text rendered from Markdown to safe HTML for the page.

Raw HTML in the source is escaped, links are limited to http(s), mailto and
this site's own paths, and images are not rendered (an external image would
leak the reader's IP and break the page's Content-Security-Policy).
"""
from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt

from . import notices

_SAFE_SCHEMES = ("http://", "https://", "mailto:")


def _validate_link(url: str) -> bool:
    lowered = url.strip().lower()
    return lowered.startswith(_SAFE_SCHEMES) or lowered.startswith(("#", "/")) and not lowered.startswith("//")


def _build() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    md.validateLink = _validate_link  # type: ignore[method-assign]  # the documented hook
    md.add_render_rule("link_open", _link_open)
    return md


def _link_open(self: Any, tokens: list[Any], idx: int, options: Any, env: Any) -> str:
    tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
    tokens[idx].attrSet("target", "_blank")
    return self.renderToken(tokens, idx, options, env)


_markdown = _build()


def render_markdown(text: str) -> str:
    """Safe HTML for a model's answer."""
    return _markdown.render(text or "")


def page_view(view: dict[str, Any]) -> dict[str, Any]:
    """A client view with what the page shows for it: an answer's HTML, a notice's text.

    A notice's text is in the active language, so call this under the user's.
    """
    role = view.get("role")
    if role == "assistant":
        return {**view, "html": render_markdown(view.get("content") or "")}
    if role == "notice":
        return {**view, "notice_text": notices.text(view.get("notice_code") or "", view.get("notice_params"))}
    return view
