"""What "inert HTML" means for the page, checked with the standard library's parser."""

from __future__ import annotations

from html.parser import HTMLParser


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.inline_scripts: list[str] = []
        self.data_blocks: dict[str, str] = {}  # id -> text of each <script type="application/json">
        self._in_script_without_src = False
        self._in_data_block: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        data_block = tag == "script" and attributes.get("type") == "application/json"
        self._in_data_block = (attributes.get("id") or "") if data_block else None
        if data_block:
            self.data_blocks[self._in_data_block or ""] = ""
        self._in_script_without_src = tag == "script" and not attributes.get("src") and not data_block
        if self._in_script_without_src:
            self.inline_scripts.append("")

    def handle_data(self, data: str) -> None:
        if self._in_data_block is not None:
            self.data_blocks[self._in_data_block] += data
        elif self._in_script_without_src:
            self.inline_scripts[-1] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script_without_src = False
            self._in_data_block = None


def parse(html: str) -> _Collector:
    collector = _Collector()
    collector.feed(html)
    collector.close()
    return collector


def active_parts(html: str) -> list[str]:
    """Everything in ``html`` that could run script or load from elsewhere."""
    found = []
    for tag, attributes in parse(html).tags:
        if tag in {"script", "img", "iframe", "object", "embed", "style", "link", "form", "svg", "math"}:
            found.append(f"<{tag}>")
        for name, value in attributes.items():
            if name.startswith("on") or name in {"style", "srcdoc", "formaction"}:
                found.append(f"{tag}[{name}]")
            if name in {"href", "src", "action"} and (value or "").strip().lower().startswith(
                ("javascript:", "data:", "vbscript:")
            ):
                found.append(f"{tag}[{name}={value}]")
    return found
