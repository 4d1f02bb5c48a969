"""The page's scripts import one way: no module imports one that imports it back, however far round.

The bottom (``chat/page.js``: config, state, the bus) imports nothing; the transport announces on the bus
instead of importing the views; views import only below them; ``chat/main.js`` wires them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "agent" / "static" / "agent"
IMPORT = re.compile(r"""^\s*import\s[^;]*?from\s+["'](\.{1,2}/[^"']+)["']""", re.M | re.S)


def imports() -> dict[Path, set[Path]]:
    graph = {}
    for module in STATIC.rglob("*.js"):
        graph[module] = {(module.parent / found).resolve() for found in IMPORT.findall(module.read_text())}
    return graph


def cycle_through(graph: dict[Path, set[Path]], start: Path) -> list[Path] | None:
    """A path of imports from ``start`` back to itself, if there is one."""
    stack = [(start, [start])]
    seen = set()
    while stack:
        module, path = stack.pop()
        for target in graph.get(module, ()):
            if target == start:
                return [*path, target]
            if target not in seen:
                seen.add(target)
                stack.append((target, [*path, target]))
    return None


def test_the_import_reader_sees_the_page_s_imports() -> None:
    graph = imports()
    main = (STATIC / "chat" / "main.js").resolve()
    assert (STATIC / "chat" / "page.js").resolve() in graph[main]
    assert (STATIC / "attachments.js").resolve() in graph[main]


@pytest.mark.parametrize("module", sorted(p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*.js")))
def test_no_module_imports_itself_round_a_ring(module: str) -> None:
    cycle = cycle_through(imports(), (STATIC / module).resolve())
    assert cycle is None, " -> ".join(p.relative_to(STATIC).as_posix() for p in cycle or [])


def test_the_bottom_of_the_page_imports_nothing() -> None:
    assert imports()[(STATIC / "chat" / "page.js").resolve()] == set()


def test_the_transport_imports_no_view() -> None:
    graph = imports()
    views = {(STATIC / "chat" / name).resolve() for name in ("chats.js", "messages.js", "composer.js", "cards.js")}
    for transport in ("api.js", "socket.js", "eventstream.js"):
        assert not graph[(STATIC / "chat" / transport).resolve()] & views, transport
