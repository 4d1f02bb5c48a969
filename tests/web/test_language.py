"""The language picker (issue 8): the app's own endpoint, offering the site's LANGUAGES only,
saving the user's own setting and setting the request's language as Django's set_language does."""

from __future__ import annotations

import pytest
from django.conf import global_settings, settings
from django.test import Client, override_settings
from django.urls import reverse

from agent.models import UserSettings
from tests.support.factories import UserSettingsFactory
from tests.support.inert import parse

pytestmark = pytest.mark.django_db

WITHOUT_LOCALE_MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != "django.middleware.locale.LocaleMiddleware"]


def choose(client: Client, language: str, next_url: str | None = "/assistant/", **headers: str):
    data = {"language": language} | ({"next": next_url} if next_url is not None else {})
    return client.post(reverse("agent:language"), data, headers=headers)


def picker_options(html: str) -> list[str]:
    return [a["value"] for tag, a in parse(html).tags if tag == "option"]


def test_the_choice_is_saved_as_the_users_own_setting_and_sets_the_cookie(session, user):
    client, _ref = session
    response = choose(client, "ru")
    assert response.status_code == 302 and response["Location"] == "/assistant/"
    assert UserSettings.objects.get(user=user).language == "ru"
    cookie = response.cookies[settings.LANGUAGE_COOKIE_NAME]
    assert cookie.value == "ru" and cookie["path"] == settings.LANGUAGE_COOKIE_PATH


def test_a_changed_choice_updates_the_setting_and_keeps_the_rest(session, user):
    client, _ref = session
    UserSettingsFactory(user=user, language="ru", instructions="Be brief.")
    choose(client, "et")
    own = UserSettings.objects.get(user=user)
    assert (own.language, own.instructions) == ("et", "Be brief.")


@override_settings(MIDDLEWARE=WITHOUT_LOCALE_MIDDLEWARE)
def test_on_a_site_without_locale_middleware_the_choice_still_changes_the_page(session):
    client, _ref = session
    assert '<html lang="en">' in client.get(reverse("agent:chat")).content.decode()
    choose(client, "ru")
    assert '<html lang="ru">' in client.get(reverse("agent:chat")).content.decode()


def test_a_language_the_site_does_not_offer_is_refused_and_nothing_changes(session, user):
    client, _ref = session
    response = choose(client, "de")
    assert response.status_code == 400
    assert settings.LANGUAGE_COOKIE_NAME not in response.cookies
    assert not UserSettings.objects.filter(user=user).exists()


@pytest.mark.parametrize("next_url", ["https://elsewhere.example/", "//elsewhere.example/x", "javascript:alert(1)"])
def test_a_next_url_off_the_site_is_replaced_by_the_chat(session, next_url):
    client, _ref = session
    assert choose(client, "ru", next_url)["Location"] == reverse("agent:chat")


def test_without_next_it_goes_back_to_the_referring_page_on_this_site(session):
    client, _ref = session
    response = choose(client, "ru", None, referer="http://testserver/assistant/c/x/")
    assert response["Location"] == "http://testserver/assistant/c/x/"


def test_a_signed_out_visitor_only_gets_the_cookie():
    response = choose(Client(), "et")
    assert response.status_code == 302 and response.cookies[settings.LANGUAGE_COOKIE_NAME].value == "et"
    assert not UserSettings.objects.exists()


def test_the_choice_needs_the_csrf_token(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert choose(client, "ru").status_code == 403
    assert not UserSettings.objects.filter(user=user).exists()


def test_the_choice_is_post_only(session):
    client, _ref = session
    assert client.get(reverse("agent:language"), {"language": "ru"}).status_code == 405


def test_the_picker_posts_to_the_apps_endpoint_and_lists_the_sites_languages(session):
    client, _ref = session
    html = client.get(reverse("agent:chat")).content.decode()
    (form,) = [a for tag, a in parse(html).tags if tag == "form" and a.get("class") == "language-form"]
    assert form["action"] == reverse("agent:language") and form["method"] == "post"
    assert picker_options(html) == [code for code, _name in settings.LANGUAGES]


def test_the_picker_marks_the_users_own_language(session, user):
    client, _ref = session
    UserSettingsFactory(user=user, language="et")
    html = client.get(reverse("agent:chat")).content.decode()
    (selected,) = [a["value"] for tag, a in parse(html).tags if tag == "option" and "selected" in a]
    assert selected == "et" and '<html lang="et">' in html


@override_settings(LANGUAGES=global_settings.LANGUAGES, LANGUAGE_CODE="en")
def test_a_site_that_never_chose_its_languages_gets_no_picker_of_every_language(session):
    client, _ref = session
    html = client.get(reverse("agent:chat")).content.decode()
    assert picker_options(html) == [] and 'class="language-form"' not in html
    assert choose(client, "fr").status_code == 400
    assert choose(client, "en").status_code == 302
