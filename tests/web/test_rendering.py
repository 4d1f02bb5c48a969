"""Output handling: a model's Markdown becomes inert HTML; notices come in the user's language."""

from __future__ import annotations

import pytest
from django.utils import translation

from agent import notices
from agent.conversations import append_message, client_view, create_conversation, get_message
from agent.models import Message
from agent.web.rendering import page_view, render_markdown
from tests.support.inert import active_parts, parse

HOSTILE = "\n\n".join(
    [
        "Hello **there**.",
        "<script>alert(1)</script>",
        "[click](javascript:alert(1))",
        "[click too](JaVaScRiPt:alert(2))",
        "[encoded](java&#115;cript:alert(3))",
        "[data](data:text/html;base64,PHNjcmlwdD4=)",
        "<img src=x onerror=alert(1)>",
        '<a href="https://example.com" onclick="alert(1)" style="color:red">raw link</a>',
        "![tracker](https://evil.example/pixel.png)",
        "<javascript:alert(4)>",
    ]
)


def test_script_tags_are_escaped_not_run():
    html = render_markdown("<script>alert(1)</script>")
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_javascript_links_are_dropped():
    html = render_markdown("[x](javascript:alert(1))")
    assert "href" not in html and "<a" not in html


def test_img_with_onerror_is_escaped_text():
    html = render_markdown("<img src=x onerror=alert(1)>")
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_raw_html_attributes_are_escaped():
    html = render_markdown('<a href="https://example.com" onclick="alert(1)" style="color:red">t</a>')
    assert not active_parts(html) and "&lt;a href=" in html


def test_markdown_images_are_not_loaded():
    html = render_markdown("![tracker](https://evil.example/pixel.png)")
    assert "<img" not in html


def test_safe_links_open_apart_from_the_page():
    html = render_markdown("[docs](https://example.com/docs)")
    ((tag, attributes),) = [t for t in parse(html).tags if t[0] == "a"]
    assert attributes["href"] == "https://example.com/docs"
    assert attributes["rel"] == "noopener noreferrer nofollow" and attributes["target"] == "_blank"


def test_a_hostile_answer_renders_inert_as_a_whole():
    html = render_markdown(HOSTILE)
    assert active_parts(html) == []
    assert "<strong>there</strong>" in html


@pytest.mark.django_db
def test_page_view_of_a_stored_hostile_answer_is_inert(ref):
    chat = create_conversation(ref, {}, impersonated=False)
    stored = append_message(chat.pk, role=Message.Role.ASSISTANT, content=HOSTILE)
    view = page_view(get_message(ref, chat.pk, stored.pk, impersonated=False))
    assert view["content"] == HOSTILE  # the text as written, for the page to show as text if it must
    assert active_parts(view["html"]) == []


@pytest.mark.django_db
def test_only_answers_get_html(ref):
    chat = create_conversation(ref, {}, impersonated=False)
    user_message = append_message(chat.pk, role=Message.Role.USER, content="<b>hi</b>")
    tool_message = append_message(
        chat.pk,
        role=Message.Role.TOOL,
        tool_name="notes_search",
        tool_outcome="ok",
        tool_result={"notes": [], "count": 0},
        content="<i>x</i>",
    )
    for stored in (user_message, tool_message):
        view = page_view(client_view(Message.objects.get(pk=stored.pk)))
        assert "html" not in view and "notice_text" not in view


@pytest.mark.django_db
def test_notice_text_follows_the_active_language(ref):
    chat = create_conversation(ref, {}, impersonated=False)
    stored = notices.write(chat.pk, "model_failed", {"code": "budget_exceeded", "limit": "5.00"})
    view = client_view(Message.objects.get(pk=stored.pk))
    with translation.override("en"):
        english = page_view(view)["notice_text"]
    with translation.override("ru"):
        russian = page_view(view)["notice_text"]
        expected = notices.text("model_failed", {"code": "budget_exceeded", "limit": "5.00"})
    assert english == "The assistant's spending limit was reached (5.00)."
    assert expected != english, "the ru catalogue translates the notice"
    assert russian == expected
