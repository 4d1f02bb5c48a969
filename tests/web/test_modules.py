"""The page's script as ES modules: every import resolves to a module the app ships, and the page
names a favicon and its keyboard shortcuts."""

from __future__ import annotations

import re
from pathlib import Path

from django.contrib.staticfiles import finders
from django.urls import reverse

from tests.support.inert import parse

CHAT = Path(finders.find("agent/chat/main.js")).parent
IMPORT = re.compile(r'^import \{([^}]*)\} from "(\.{1,2}/[\w/-]+\.js)";$', re.M)
EXPORTED = re.compile(r"^export (?:async function|function|const|let|class) ([\w$]+)", re.M)
RE_EXPORTED = re.compile(r'^export \{([^}]*)\} from "[^"]+";$', re.M)


def exports(module: Path) -> set[str]:
    """What a module exports: its own declarations and the names it passes on from another."""
    text = module.read_text()
    passed_on = {name.strip() for names in RE_EXPORTED.findall(text) for name in names.split(",") if name.strip()}
    return set(EXPORTED.findall(text)) | passed_on


def test_every_import_names_an_export_of_a_shipped_module():
    modules = sorted([*CHAT.glob("*.js"), *CHAT.parent.glob("*.js")])
    assert {m.stem for m in modules} >= {"api", "socket", "chats", "messages", "cards", "composer", "main", "http"}
    for module in modules:
        for names, target in IMPORT.findall(module.read_text()):
            exported = exports((module.parent / target).resolve())
            wanted = {name.strip() for name in names.split(",") if name.strip()}  # a trailing comma is allowed
            assert wanted <= exported, (module.name, target, wanted - exported)


def test_no_module_reaches_for_raw_html_except_the_answers_and_drafts_the_server_made_safe():
    uses = sorted(
        (m.name, line.strip())
        for m in CHAT.glob("*.js")
        for line in m.read_text().splitlines()
        if "innerHTML" in line or "insertAdjacentHTML" in line or "outerHTML" in line
    )
    assert uses == [
        ("messages.js", "body.innerHTML = frame.html; // sanitised on the server, as a stored answer is"),
        (
            "messages.js",
            "body.innerHTML = view.html; // sanitised on the server: raw HTML escaped, unsafe links dropped",
        ),
    ]


def test_the_page_names_its_favicon_and_lists_its_shortcuts(session):
    client, _ref = session
    html = client.get(reverse("agent:chat")).content.decode()
    icons = [a["href"] for tag, a in parse(html).tags if tag == "link" and a.get("rel") == "icon"]
    assert len(icons) == 1 and icons[0].endswith("agent/favicon.svg") and finders.find("agent/favicon.svg")
    assert 'id="shortcuts-dialog"' in html and "<kbd>Alt</kbd> + <kbd>N</kbd>" in html
