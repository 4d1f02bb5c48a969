"""The table of file kinds: detection, extraction, the settings and the page read the same rows."""

from __future__ import annotations

import pytest

from agent.attachments.detection import detect, is_picture
from agent.core.conf import AgentConf
from agent.core.file_kinds import BY_TYPE, KINDS, extensions_for
from agent.web.views import accepted_extensions

SAMPLES = {
    "text/plain": b"hello",
    "text/markdown": b"# title",
    "text/csv": b"a,b\n1,2",
    "application/json": b'{"a": 1}',
    "application/pdf": b"%PDF-1.7\n",
    "image/png": b"\x89PNG\r\n\x1a\n" + b"\x00" * 8,
    "image/jpeg": b"\xff\xd8\xff\xe0",
    "image/webp": b"RIFF\x00\x00\x00\x00WEBPVP8 ",
    "image/gif": b"GIF89a",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": b"PK\x03\x04",
}


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.content_type)
def test_each_kind_is_detected_under_each_of_its_endings(kind) -> None:
    for extension in kind.extensions:
        assert detect(f"file{extension.upper()}", SAMPLES[kind.content_type]) == kind.content_type


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.content_type)
def test_a_binary_signature_under_a_text_ending_is_refused_and_the_reverse(kind) -> None:
    if kind.is_text:
        assert detect(f"file{kind.extensions[0]}", SAMPLES["application/pdf"]) is None
    else:
        assert detect(f"file{kind.extensions[0]}", b"plain words") is None


def test_every_kind_is_accepted_by_default_and_pictures_are_the_pillow_kinds() -> None:
    assert AgentConf.ACCEPTED_TYPES == [kind.content_type for kind in KINDS] == list(BY_TYPE)
    assert {kind.content_type for kind in KINDS if is_picture(kind.content_type)} == {
        "image/png",
        "image/jpeg",
        "image/webp",
        "image/gif",
    }


def test_the_page_offers_the_endings_of_the_accepted_types(settings) -> None:
    settings.AGENT = {**settings.AGENT, "ACCEPTED_TYPES": ["image/jpeg", "text/csv"]}
    assert accepted_extensions() == [".csv", ".jpg", ".jpeg"]
    assert extensions_for(["image/gif"]) == [".gif"]
