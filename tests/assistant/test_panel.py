"""The "My assistant" panel: its data, its writes through the ladder, its page."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from agent import user_settings
from agent.access import SessionRef
from agent.core.errors import Forbidden, Impersonated, Mismatch, SessionGone
from agent.models import AgentSettings, Endpoint, Turn, UserSettings
from tests.support.factories import AIRequestFactory, EndpointFactory, TurnFactory, UserSettingsFactory
from tests.support.sessions import login

pytestmark = pytest.mark.django_db


def other(name: str, **fields: Any) -> Endpoint:
    return EndpointFactory(name=name, base_url="http://127.0.0.1:9/v1", model=f"{name}-model", **fields)


def allow(*endpoints: Endpoint) -> None:
    AgentSettings.current().selectable_endpoints.set(endpoints)


def explanations(ref: SessionRef) -> tuple[str, str]:
    models = user_settings.panel(ref, impersonated=False)["models"]
    return models["chat"]["explanation"], models["pictures"]["explanation"]


def test_the_panel_names_whose_model_reads_pictures(ref: SessionRef, user: Any, endpoint: Endpoint) -> None:
    # given the user's own model for chats, and no model for pictures anywhere: pictures go to it
    mine = other("mine", supports_images=True)
    UserSettings.objects.update_or_create(user=user, defaults={"endpoint": mine, "endpoint_set_by": "staff"})
    assert explanations(ref) == ("Your own model.", "Your own model.")

    # when the site has a model for pictures, pictures go there, and the panel says it is the site's
    site_pictures = other("site pictures", supports_images=True)
    AgentSettings.objects.filter(pk=AgentSettings.current().pk).update(picture_endpoint=site_pictures)
    assert explanations(ref) == ("Your own model.", "The site's model for pictures.")

    # a picture model of the user's own that is switched off falls back to the site's, saying why
    own_pictures = other("own pictures", supports_images=True, enabled=False)
    UserSettings.objects.filter(user=user).update(picture_endpoint=own_pictures, picture_endpoint_set_by="staff")
    assert explanations(ref)[1] == "The site's model for pictures: your own model for pictures is switched off."

    # with no site model for pictures, that fallback goes to the user's own chat model, and says so
    AgentSettings.objects.filter(pk=AgentSettings.current().pk).update(picture_endpoint=None)
    assert explanations(ref)[1] == "Your own model for chats: your own model for pictures is switched off."
    Endpoint.objects.filter(pk=own_pictures.pk).update(enabled=True)
    assert explanations(ref)[1] == "Your own model for pictures."


def test_the_panel_shows_the_models_in_effect_and_where_they_come_from(ref: SessionRef, endpoint: Endpoint) -> None:
    data = user_settings.panel(ref, impersonated=False)
    chat = data["models"]["chat"]
    assert chat["endpoint"]["name"] == "scripted" and chat["source"] == "default"
    assert "base_url" not in chat["endpoint"] and "api_key" not in json.dumps(data)
    assert data["picker"]["offered"] is False and data["picker"]["endpoints"] == []
    assert data["max_instructions"] == 4000


def test_a_user_picks_a_model_from_the_allow_list(ref: SessionRef, user: Any, endpoint: Endpoint) -> None:
    mine = other("second")
    allow(mine)
    data = user_settings.update(ref, {"endpoint": str(mine.pk)}, impersonated=False)
    assert data["models"]["chat"]["source"] == "personal" and data["picker"]["endpoint"] == mine.pk
    row = UserSettings.objects.get(user=user)
    assert (row.endpoint, row.endpoint_set_by) == (mine, "user")
    # and back to the site's model
    data = user_settings.update(ref, {"endpoint": ""}, impersonated=False)
    assert data["models"]["chat"]["source"] == "default"


def test_a_user_cannot_pick_a_model_off_the_allow_list(ref: SessionRef, user: Any, endpoint: Endpoint) -> None:
    allowed, hidden, off = other("allowed"), other("hidden"), other("off", enabled=False)
    allow(allowed, off)
    for value in (hidden.pk, off.pk, "nope", 99999):
        with pytest.raises(ValidationError) as refused:
            user_settings.update(ref, {"endpoint": value}, impersonated=False)
        assert list(refused.value.message_dict) == ["endpoint"]
    assert not UserSettings.objects.filter(user=user, endpoint__isnull=False).exists()


def test_with_an_empty_allow_list_there_is_no_picking(ref: SessionRef, user: Any, endpoint: Endpoint) -> None:
    with pytest.raises(ValidationError) as refused:
        user_settings.update(ref, {"endpoint": endpoint.pk}, impersonated=False)
    assert "not offered" in refused.value.message_dict["endpoint"][0]


def test_a_user_cannot_pick_over_staffs_choice(ref: SessionRef, user: Any, endpoint: Endpoint) -> None:
    staff_pick, mine = other("staff pick"), other("mine")
    allow(mine)
    UserSettingsFactory(user=user, endpoint=staff_pick, endpoint_set_by="staff")
    assert user_settings.panel(ref, impersonated=False)["picker"]["endpoint_locked"] is True
    with pytest.raises(ValidationError) as refused:
        user_settings.update(ref, {"endpoint": mine.pk}, impersonated=False)
    assert list(refused.value.message_dict) == ["endpoint"]
    assert UserSettings.objects.get(user=user).endpoint == staff_pick


def test_a_picture_pick_must_see_pictures(ref: SessionRef, user: Any, endpoint: Endpoint) -> None:
    blind, seeing = other("blind"), other("seeing", supports_images=True)
    allow(blind, seeing)
    with pytest.raises(ValidationError) as refused:
        user_settings.update(ref, {"picture_endpoint": blind.pk}, impersonated=False)
    assert list(refused.value.message_dict) == ["picture_endpoint"]
    data = user_settings.update(ref, {"picture_endpoint": seeing.pk}, impersonated=False)
    assert data["models"]["pictures"]["endpoint"]["name"] == "seeing"
    assert data["models"]["chat"]["endpoint"]["name"] == "scripted"


def test_instructions_and_language_are_written_and_checked_by_field(ref: SessionRef, user: Any, endpoint: Any) -> None:
    data = user_settings.update(
        ref, {"instructions": "Be brief.", "language": "et", "role": "admin"}, impersonated=False
    )
    assert (data["instructions"], data["language"]) == ("Be brief.", "et")
    with pytest.raises(ValidationError) as refused:
        user_settings.update(ref, {"instructions": "x" * 4001, "language": "xx"}, impersonated=False)
    assert sorted(refused.value.message_dict) == ["instructions", "language"]
    row = UserSettings.objects.get(user=user)
    assert (row.instructions, row.language) == ("Be brief.", "et")  # all or nothing
    user_settings.update(ref, {"instructions": "y" * 4000}, impersonated=False)


def test_the_panel_refuses_as_the_ladder_says(ref: SessionRef, user: Any, make_user: Any, endpoint: Any) -> None:
    with pytest.raises(Impersonated):
        user_settings.update(ref, {"instructions": "x"}, impersonated=True)
    with pytest.raises(Impersonated):
        user_settings.panel(ref, impersonated=True)
    stranger = make_user()
    _client, their_ref = login(stranger)
    with pytest.raises(Mismatch):
        user_settings.update(
            SessionRef(session_key=their_ref.session_key, user_id=user.pk), {"instructions": "x"}, impersonated=False
        )
    with pytest.raises(SessionGone):
        user_settings.panel(SessionRef(session_key="nope", user_id=user.pk), impersonated=False)
    UserSettingsFactory(user=stranger, enabled=False)
    with pytest.raises(Forbidden):
        user_settings.update(their_ref, {"instructions": "x"}, impersonated=False)
    assert not UserSettings.objects.filter(user=user).exists()
    with pytest.raises(TypeError):
        user_settings.panel(ref)  # type: ignore[call-arg]


def test_usage_counts_the_rolling_window_against_personal_caps(
    ref: SessionRef, user: Any, chat: Any, endpoint: Any
) -> None:
    AgentSettings.objects.filter(pk=AgentSettings.current().pk).update(
        daily_cost_per_user=Decimal("5"), daily_turns_per_user=10
    )
    UserSettingsFactory(user=user, daily_turns_cap=2)
    AIRequestFactory(user=user, cost_usd=Decimal("1.25"))
    TurnFactory(
        conversation=chat, user=user, language="en", text="a", deadline_at="2030-01-01T00:00Z", status="finished"
    )
    TurnFactory(
        conversation=chat, user=user, language="en", text="b", deadline_at="2030-01-01T00:00Z", status="finished"
    )
    usage = {item["limit"]: item for item in user_settings.panel(ref, impersonated=False)["usage"]}
    assert (Decimal(usage["cost_per_user"]["used"]), Decimal(usage["cost_per_user"]["cap"])) == (Decimal("1.25"), 5)
    assert usage["cost_per_user"]["reached"] is False and usage["cost_per_user"]["frees_at"] is None
    turns = usage["turns_per_user"]
    assert (turns["used"], turns["cap"], turns["reached"]) == ("2", "2", True)
    first = Turn.objects.order_by("created_at").first()
    assert turns["frees_at"] == (first.created_at + timedelta(hours=24)).isoformat()
    assert "2 of your 2 turns" in turns["message"]
    assert "cost_site" not in usage


def test_the_panel_shows_each_quota_used_against_its_cap(
    ref: SessionRef, user: Any, chat: Any, endpoint: Any, settings: Any
) -> None:
    # given: caps of 1000 stored bytes, 1 new chat and 5 uploads a minute; one chat made and 600 bytes stored
    settings.AGENT = {
        **settings.AGENT,
        "MAX_STORED_BYTES_PER_USER": 1000,
        "NEW_CHATS_PER_MINUTE": 1,
        "UPLOADS_PER_MINUTE": 5,
    }
    from agent.attachments.api import add_attachment
    from tests.support.files import upload

    add_attachment(ref, chat.pk, upload("a.txt", b"x" * 600), impersonated=False)
    # when
    quotas = {item["limit"]: item for item in user_settings.panel(ref, impersonated=False)["quotas"]}
    # then
    stored, chats, uploads = quotas["stored_bytes"], quotas["new_chats_per_minute"], quotas["uploads_per_minute"]
    assert (stored["used"], stored["cap"], stored["reached"]) == (600, 1000, False)
    assert stored["text"] == "Stored files: 600\xa0bytes of 1000\xa0bytes"
    assert (chats["used"], chats["cap"], chats["reached"]) == (1, 1, True) and chats["frees_at"]
    assert chats["text"].startswith("You started 1 chat in the last minute, the most allowed is 1. Try again in ")
    assert (uploads["used"], uploads["cap"]) == (1, 5) and uploads["text"] == "Files added in the last minute: 1 of 5"


def test_the_panel_page_has_a_place_for_the_quotas(user: Any, endpoint: Any) -> None:
    client, _ref = login(user)
    body = client.get(reverse("agent:assistant")).content.decode()
    assert 'id="quotas"' in body


# -- over HTTP -----------------------------------------------------------------------


def test_the_api_reads_and_writes_with_csrf(user: Any, endpoint: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    url = reverse("agent:assistant_api")
    assert client.get(url).json()["models"]["chat"]["source"] == "default"
    refused = client.post(url, json.dumps({"instructions": "x"}), content_type="application/json")
    assert (refused.status_code, refused.json()["error"]) == (403, "csrf_failed")
    page = client.get(reverse("agent:assistant"))
    token = page.cookies["csrftoken"].value
    saved = client.post(
        url, json.dumps({"instructions": "Be kind."}), content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert saved.status_code == 200 and saved.json()["instructions"] == "Be kind."
    invalid = client.post(url, json.dumps({"language": "xx"}), content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert invalid.status_code == 400 and list(invalid.json()["fields"]) == ["language"]


def test_the_api_refuses_an_impersonating_session(user: Any, endpoint: Any) -> None:
    client, _ref = login(user)
    session = client.session
    session["hijack_history"] = ["1"]
    session.save()
    response = client.post(
        reverse("agent:assistant_api"), json.dumps({"instructions": "x"}), content_type="application/json"
    )
    assert (response.status_code, response.json()["error"]) == (401, "impersonated")
    assert not UserSettings.objects.filter(user=user).exists()


def test_the_page_loads_its_script_under_the_strict_policy(user: Any, endpoint: Any) -> None:
    client, _ref = login(user)
    response = client.get(reverse("agent:assistant"))
    body = response.content.decode()
    assert response.status_code == 200 and "agent/assistant.js" in body and reverse("agent:jsi18n") in body
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert "<script>" not in body and "style=" not in body
    assert Client().get(reverse("agent:assistant")).status_code == 302  # signed out: to the login page


def test_a_site_s_own_instructions_limit_is_the_only_one(ref: SessionRef, user: Any, settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "MAX_INSTRUCTIONS_CHARS": 6000}
    user_settings.update(ref, {"instructions": "y" * 6000}, impersonated=False)
    assert UserSettings.objects.get(user=user).instructions == "y" * 6000
    with pytest.raises(ValidationError):
        user_settings.update(ref, {"instructions": "y" * 6001}, impersonated=False)


def test_the_panel_says_how_many_tools_the_assistant_may_use_for_the_user(
    ref: SessionRef, user: Any, endpoint: Endpoint
) -> None:
    # the ``user`` fixture reads, adds and changes notes: the test site's three reads and three writes
    assert user_settings.panel(ref, impersonated=False)["tools"] == {
        "count": 6,
        "text": "The assistant can use 6 tools of this site for you.",
    }
