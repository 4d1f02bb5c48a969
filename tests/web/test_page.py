"""The chat page: login required, a strict CSP, nothing inline, the user's language."""

from __future__ import annotations

import json
import re

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import translation
from django.utils.translation import check_for_language

from agent import conversations
from agent.core import errors
from agent.models import AgentSettings
from tests.support.factories import UserFactory, UserSettingsFactory
from tests.support.inert import parse
from tests.support.sessions import login

pytestmark = pytest.mark.django_db


def test_the_page_redirects_an_anonymous_visitor_to_the_login_form():
    response = Client().get(reverse("agent:chat"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_the_page_renders_for_a_user_who_may_use_the_assistant(session):
    client, _ref = session
    response = client.get(reverse("agent:chat"))
    assert response.status_code == 200
    assert "agent/chat.html" in [t.name for t in response.templates]


def test_the_page_sends_a_strict_content_security_policy(session):
    client, _ref = session
    policy = client.get(reverse("agent:chat"))["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def test_the_page_has_no_inline_script_style_or_handlers(session):
    client, _ref = session
    html = client.get(reverse("agent:chat")).content.decode()
    parsed = parse(html)
    assert parsed.inline_scripts == []
    scripts = [a["src"] for tag, a in parsed.tags if tag == "script" and a.get("type") != "application/json"]
    assert reverse("agent:jsi18n") in scripts
    modules = [a["src"] for tag, a in parsed.tags if tag == "script" and a.get("type") == "module"]
    assert len(modules) == 1 and modules[0].endswith("agent/chat/main.js")
    assert [t for t, a in parsed.tags if "style" in a or t == "style"] == []
    assert [(t, n) for t, a in parsed.tags for n in a if n.startswith("on")] == []


def page_config(html):
    """The page's one config, as its script reads it: the JSON of its only data block."""
    blocks = parse(html).data_blocks
    assert list(blocks) == ["agent-config"]
    return json.loads(blocks["agent-config"])


def test_the_page_carries_its_facts_in_one_json_config_and_no_data_attributes(session):
    client, _ref = session
    html = client.get(reverse("agent:chat")).content.decode()
    config = page_config(html)
    assert config["urls"]["list"] == reverse("agent:conversation_list")
    assert config["websocket_path"] == "/ws/agent/"
    (app,) = [a for tag, a in parse(html).tags if a.get("id") == "agent-app"]
    assert [name for name in app if name.startswith("data-")] == []


def test_the_config_takes_its_page_sizes_limits_and_codes_from_the_settings(session, settings):
    settings.AGENT = {**settings.AGENT, "MESSAGES_PAGE": 7, "MAX_TITLE_CHARS": 90, "MAX_FILES_PER_MESSAGE": 2}
    client, _ref = session
    html = client.get(reverse("agent:chat")).content.decode()
    config = page_config(html)
    assert (config["messages_page"], config["max_title_chars"], config["max_files"]) == (7, 90, 2)
    assert config["close_codes"]["session_ended"] == 4401
    assert set(config["session_codes"]) == {"session_gone", "mismatch", "inactive", "impersonated"}
    (title,) = [a for tag, a in parse(html).tags if a.get("id") == "rename-title"]
    assert title["maxlength"] == "90"


def test_the_search_box_takes_its_length_limit_from_the_chat_search(session):
    client, _ref = session
    html = client.get(reverse("agent:chat")).content.decode()
    assert page_config(html)["search_max_chars"] == conversations.SEARCH_MAX_CHARS
    (search,) = [a for tag, a in parse(html).tags if a.get("id") == "chat-search"]
    assert search["maxlength"] == str(conversations.SEARCH_MAX_CHARS)


def test_the_config_s_sentences_are_the_server_s_in_the_user_s_language(user):
    UserSettingsFactory(user=user, language="ru")
    client, _ref = login(user)
    config = page_config(client.get(reverse("agent:chat")).content.decode())
    with translation.override("ru"):
        assert config["messages"]["not_found"] == str(errors.NotFound().message)
    assert config["messages"]["not_found"] != "This chat is no longer there."


def test_the_starter_suggestions_are_translated_defaults_or_the_site_s_own(user, settings):
    UserSettingsFactory(user=user, language="ru")
    client, _ref = login(user)
    html = client.get(reverse("agent:chat")).content.decode()
    suggestions = page_config(html)["suggestions"]
    assert suggestions[0] == "Чем ты можешь мне помочь?" and len(suggestions) == 3
    assert re.findall(r'<button type="button" class="suggestion">(.*?)</button>', html) == suggestions

    settings.AGENT = {**settings.AGENT, "STARTER_SUGGESTIONS": ["Show my notes"]}
    assert page_config(client.get(reverse("agent:chat")).content.decode())["suggestions"] == ["Show my notes"]
    settings.AGENT = {**settings.AGENT, "STARTER_SUGGESTIONS": []}
    html = client.get(reverse("agent:chat")).content.decode()
    assert page_config(html)["suggestions"] == [] and 'class="suggestions"' not in html


def test_the_config_gives_how_much_of_a_file_the_model_reads(session, settings):
    settings.AGENT = {**settings.AGENT, "HISTORY_CHARS": 9_000}
    client, _ref = session
    assert page_config(client.get(reverse("agent:chat")).content.decode())["attachment_text_chars"] == 9_000
    settings.AGENT = {**settings.AGENT, "ATTACHMENT_TEXT_CHARS": 5_000}
    assert page_config(client.get(reverse("agent:chat")).content.decode())["attachment_text_chars"] == 5_000


def test_a_user_without_the_permission_sees_a_translated_refusal_page():
    client, _ref = login(UserFactory())
    response = client.get(reverse("agent:chat"))
    assert response.status_code == 403
    assert "agent/unavailable.html" in [t.name for t in response.templates]
    assert b'data-code="forbidden"' in response.content


def test_a_switched_off_assistant_shows_the_refusal_page(session):
    client, _ref = session
    AgentSettings.objects.update_or_create(pk=1, defaults={"enabled": False})
    assert client.get(reverse("agent:chat")).status_code == 403


def test_the_page_speaks_the_users_own_language(user):
    UserSettingsFactory(user=user, language="ru")
    client, _ref = login(user)
    response = client.get(reverse("agent:chat"), HTTP_ACCEPT_LANGUAGE="et")
    assert b'<html lang="ru">' in response.content  # the user's setting decides, not the browser


def test_without_an_own_language_the_language_cookie_decides(session):
    assert check_for_language("et"), "the et catalogue is there"
    client, _ref = session
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "et"
    response = client.get(reverse("agent:chat"))
    assert b'<html lang="et">' in response.content and b'class="language-form"' in response.content


def test_the_script_catalogue_is_javascript_in_the_users_language(user):
    UserSettingsFactory(user=user, language="ru")
    client, _ref = login(user)
    response = client.get(reverse("agent:jsi18n"))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/javascript")
    assert b"django.gettext" in response.content


def test_the_login_form_signs_in_and_goes_to_the_chat(user):
    client = Client()
    page = client.get(reverse("login"))
    assert page.status_code == 200 and b'name="username"' in page.content
    response = client.post(reverse("login"), {"username": user.username, "password": "pw-for-tests"})
    assert response.status_code == 302 and response["Location"] == reverse("agent:chat")
    assert client.get(reverse("agent:chat")).status_code == 200


def test_a_host_page_that_includes_the_language_form_gets_the_apps_picker():
    html = Client().get(reverse("login") + "?next=/assistant/").content.decode()
    (form,) = [a for tag, a in parse(html).tags if tag == "form" and a.get("action") == reverse("agent:language")]
    assert form["method"] == "post"
    assert 'name="csrfmiddlewaretoken"' in html
    (next_field,) = [
        a
        for tag, a in parse(html).tags
        if tag == "input" and a.get("name") == "next" and a.get("value", "").startswith("/accounts/")
    ]
    assert next_field["value"] == reverse("login") + "?next=/assistant/"
