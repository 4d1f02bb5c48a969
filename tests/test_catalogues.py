"""The ru and et catalogues are complete, and the compiled ones are in use."""

import re
from pathlib import Path

import pytest
from django.utils import translation

LOCALE = Path(__file__).resolve().parent.parent / "agent" / "locale"
ENTRY = re.compile(r'^(#,[^\n]*\n)?(?:#[^\n]*\n)*msgid ((?:"[^\n]*"\n)+)msgstr ((?:"[^\n]*"\n?)+)', re.M)


def _entries(path: Path) -> list[tuple[str, str, str]]:
    joined = lambda block: "".join(re.findall(r'"(.*)"', block))  # noqa: E731
    return [(flags or "", joined(msgid), joined(msgstr)) for flags, msgid, msgstr in ENTRY.findall(path.read_text())]


@pytest.mark.parametrize("lang", ["ru", "et"])
@pytest.mark.parametrize("domain", ["django", "djangojs"])
def test_every_phrase_is_translated_and_none_is_fuzzy(lang, domain):
    entries = [e for e in _entries(LOCALE / lang / "LC_MESSAGES" / f"{domain}.po") if e[1]]
    assert entries
    assert [msgid for flags, msgid, msgstr in entries if not msgstr or "fuzzy" in flags] == []


def test_notices_speak_the_active_language():
    from agent.notices import text

    with translation.override("ru"):
        assert text("stopped") != "Stopped."
    with translation.override("et"):
        assert text("stopped") != "Stopped."
