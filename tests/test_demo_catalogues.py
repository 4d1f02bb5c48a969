"""The demo site's own phrases (its tools' titles and labels, its login page) come in Russian and Estonian."""

import gettext
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "locale"
DEMO_PHRASES = ["Search notes", "Read a note", "Create a note", "Change a note", "Title", "Text"]


@pytest.mark.parametrize("lang", ["ru", "et"])
def test_every_phrase_of_the_demo_site_is_translated(lang):
    po = (LOCALE / lang / "LC_MESSAGES" / "django.po").read_text()
    empty = re.findall(r'^msgid "(.+)"\nmsgstr ""$', po, re.M)
    assert empty == [] and "#, fuzzy" not in po
    catalogue = gettext.translation("django", localedir=LOCALE, languages=[lang])
    assert [phrase for phrase in DEMO_PHRASES if catalogue.gettext(phrase) == phrase] == []


SHOW_TITLES = """
import django
django.setup()
from django.utils import translation
from agent.step_labels import tool_title
from agent_project.notes.api import NoteSerializer
for lang in ("ru", "et"):
    with translation.override(lang):  # a card's labels are its serializer's, read in the turn's language
        print(tool_title("notes_create"), NoteSerializer().fields["title"].label)
"""


def test_the_demo_site_shows_its_tools_in_the_pages_language():
    # the demo site's own settings, in a process of its own (as manage.py runs it)
    env = os.environ | {"DJANGO_SETTINGS_MODULE": "agent_project.settings", "DEBUG": "true", "PYTHONPATH": str(ROOT)}
    env.pop("DATABASE_URL", None)
    shown = subprocess.run([sys.executable, "-c", SHOW_TITLES], cwd=ROOT, env=env, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == ["Создать заметку Название", "Märkme loomine Pealkiri"]
