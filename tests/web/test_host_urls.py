"""The pages need no URL name from the host site (issue 8): LOGIN_URL as the site set it, an
optional sign-out URL, the app's own language endpoint, and ``<html lang>`` from the active language."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse

from agent.models import AgentSettings
from tests.support.factories import UserFactory
from tests.support.inert import parse
from tests.support.sessions import login

pytestmark = pytest.mark.django_db

BARE_SITE = {
    "ROOT_URLCONF": "tests.web.bare_urls",
    "LOGIN_URL": "/signin/?from=assistant",
    "AGENT": {k: v for k, v in settings.AGENT.items() if k != "LOGOUT_URL"},
    "TEMPLATES": [
        {  # no context processors at all: the pages must not lean on the site's
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "APP_DIRS": True,
            "OPTIONS": {"context_processors": []},
        }
    ],
}


def forms(html: str) -> list[dict[str, str | None]]:
    return [attributes for tag, attributes in parse(html).tags if tag == "form"]


@override_settings(**BARE_SITE)
def test_the_page_renders_on_a_site_without_login_logout_or_set_language_urls(session):
    client, _ref = session
    response = client.get("/assistant/")
    assert response.status_code == 200
    html = response.content.decode()
    assert json.loads(parse(html).data_blocks["agent-config"])["login_url"] == "/signin/?from=assistant"
    posted_to = [f["action"] for f in forms(html) if "action" in f]
    assert posted_to == ["/assistant/language/"]  # no sign-out form: none configured
    assert '<html lang="en">' in html


@override_settings(**BARE_SITE)
def test_the_unavailable_page_links_to_the_sites_login_url_with_next():
    client, _ref = login(UserFactory())  # no permission to use the assistant
    response = client.get("/assistant/c/00000000-0000-0000-0000-000000000001/?x=1")
    assert response.status_code == 403
    links = [a["href"] for tag, a in parse(response.content.decode()).tags if tag == "a"]
    assert links == ["/signin/?from=assistant&next=/assistant/c/00000000-0000-0000-0000-000000000001/%3Fx%3D1"]


@override_settings(**BARE_SITE)
def test_the_session_ended_page_speaks_the_active_language_in_html_lang(session):
    client, _ref = session
    AgentSettings.objects.update_or_create(pk=1, defaults={"enabled": False})
    response = client.get("/assistant/", headers={"accept-language": "ru"})
    assert response.status_code == 403 and '<html lang="ru">' in response.content.decode()


def test_a_configured_logout_url_gets_a_sign_out_form_posting_there(session):
    client, _ref = session
    with override_settings(AGENT={**settings.AGENT, "LOGOUT_URL": "logout"}):
        html = client.get(reverse("agent:chat")).content.decode()
    (form,) = [f for f in forms(html) if f.get("class") == "logout-form"]
    assert form["action"] == reverse("logout") and form["method"] == "post"


def test_without_a_logout_url_the_page_has_no_sign_out_form(session):
    client, _ref = session
    with override_settings(AGENT={k: v for k, v in settings.AGENT.items() if k != "LOGOUT_URL"}):
        html = client.get(reverse("agent:chat")).content.decode()
    assert [f for f in forms(html) if f.get("class") == "logout-form"] == []
