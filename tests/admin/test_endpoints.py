"""Keys stay put: an endpoint names only variables the site allows, its key does not follow a new
base URL by accident, its history says what moved, and only ``agent.manage_endpoints`` changes it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import override_settings
from django.urls import reverse

from agent.ai import AIError, complete
from agent.models import AgentSettings, AIRequest, Endpoint
from tests.support.factories import EndpointFactory, UserSettingsFactory

pytestmark = pytest.mark.django_db
MANAGER = ("agent.manage_endpoints",)


def form_data(endpoint: Endpoint | None = None, **changes: Any) -> dict[str, Any]:
    data = {
        "name": "e",
        "base_url": "http://localhost:8080/v1",
        "api_key": "",
        "api_key_env": "",
        "model": "m",
        "input_price_per_mtok": "0",
        "output_price_per_mtok": "0",
        "audio_price_per_minute": "0",
        "timeout_s": "60",
        "enabled": "on",
        "supports_tools": "on",
    }
    if endpoint is not None:
        data.update(
            name=endpoint.name, base_url=endpoint.base_url, api_key_env=endpoint.api_key_env, model=endpoint.model
        )
    return {**data, **changes}


def change(client: Any, endpoint: Endpoint, **changes: Any) -> Any:
    return client.post(reverse("admin:agent_endpoint_change", args=[endpoint.pk]), form_data(endpoint, **changes))


@pytest.fixture
def manager(staff_with: Any) -> Any:
    return staff_with(*MANAGER)


@pytest.fixture
def keyed() -> Endpoint:
    return EndpointFactory(name="e", base_url="http://localhost:8080/v1", model="m", api_key="sk-stored-4242")


@pytest.mark.parametrize("name", ["SECRET_KEY", "DATABASE_URL", "AGENT_KEY_"])
def test_an_endpoint_form_naming_a_variable_outside_the_prefix_is_refused(manager: Any, name: str) -> None:
    response = manager.post(reverse("admin:agent_endpoint_add"), form_data(api_key_env=name))
    assert response.status_code == 200 and "api_key_env" in response.context["adminform"].form.errors
    assert not Endpoint.objects.exists()


def test_an_endpoint_form_naming_a_variable_with_the_prefix_is_saved(manager: Any) -> None:
    response = manager.post(reverse("admin:agent_endpoint_add"), form_data(api_key_env="AGENT_KEY_OPENAI"))
    assert response.status_code == 302 and Endpoint.objects.get().api_key_env == "AGENT_KEY_OPENAI"


def test_the_prefix_is_a_setting(manager: Any) -> None:
    with override_settings(AGENT={"API_KEY_ENV_PREFIX": "SITE_MODEL_"}):
        refused = manager.post(reverse("admin:agent_endpoint_add"), form_data(api_key_env="AGENT_KEY_OPENAI"))
        saved = manager.post(reverse("admin:agent_endpoint_add"), form_data(api_key_env="SITE_MODEL_OPENAI"))
    assert refused.status_code == 200 and saved.status_code == 302


def test_a_stored_variable_outside_the_prefix_is_never_read(
    user: Any, endpoint: Endpoint, model_server: Any, monkeypatch: Any
) -> None:
    # given a row written before the rule, or past the form
    monkeypatch.setenv("SECRET_KEY", "the-site-secret")
    Endpoint.objects.filter(pk=endpoint.pk).update(api_key="", api_key_env="SECRET_KEY")
    endpoint.refresh_from_db()
    # when it is called
    with pytest.raises(AIError) as refused:
        complete(endpoint, [{"role": "user", "content": "hi"}], user=user, source="agent", task="agent.chat")
    # then nothing left the process
    assert refused.value.code == "endpoint_not_configured" and model_server.requests == []
    assert AIRequest.objects.get().error_code == "endpoint_not_configured"


def test_the_test_call_of_such_an_endpoint_reaches_nobody(
    staff: Any, endpoint: Endpoint, model_server: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("SECRET_KEY", "the-site-secret")
    Endpoint.objects.filter(pk=endpoint.pk).update(api_key="", api_key_env="SECRET_KEY")
    response = staff.post(
        reverse("admin:agent_endpoint_changelist"),
        {"action": "test_call", "_selected_action": [str(endpoint.pk)]},
        follow=True,
    )
    assert "failed (endpoint_not_configured)" in response.content.decode() and model_server.requests == []


def test_a_new_base_url_removes_the_stored_key(manager: Any, keyed: Endpoint) -> None:
    assert change(manager, keyed, base_url="http://elsewhere.example/v1").status_code == 302
    keyed.refresh_from_db()
    assert (keyed.base_url, keyed.api_key) == ("http://elsewhere.example/v1", "")


def test_a_new_base_url_with_a_new_key_keeps_the_new_key(manager: Any, keyed: Endpoint) -> None:
    change(manager, keyed, base_url="http://elsewhere.example/v1", api_key="sk-new-5353")
    keyed.refresh_from_db()
    assert keyed.api_key == "sk-new-5353"


def test_the_same_base_url_keeps_the_stored_key(manager: Any, keyed: Endpoint) -> None:
    change(manager, keyed, model="m2")
    keyed.refresh_from_db()
    assert (keyed.model, keyed.api_key) == ("m2", "sk-stored-4242")


def test_a_new_base_url_keeping_a_variable_needs_the_tick(manager: Any) -> None:
    endpoint = EndpointFactory(name="e", base_url="http://localhost:8080/v1", model="m", api_key_env="AGENT_KEY_OPENAI")
    refused = change(manager, endpoint, base_url="http://elsewhere.example/v1")
    assert refused.status_code == 200 and "send_key_to_new_url" in refused.context["adminform"].form.errors
    endpoint.refresh_from_db()
    assert endpoint.base_url == "http://localhost:8080/v1"
    assert (
        change(manager, endpoint, base_url="http://elsewhere.example/v1", send_key_to_new_url="on").status_code == 302
    )
    endpoint.refresh_from_db()
    assert endpoint.base_url == "http://elsewhere.example/v1"


def test_the_history_names_the_old_and_new_base_url_and_never_the_key(manager: Any, keyed: Endpoint) -> None:
    change(manager, keyed, base_url="http://elsewhere.example/v1", api_key="sk-new-5353")
    entry = LogEntry.objects.get(object_id=str(keyed.pk))
    message = entry.get_change_message()
    assert "http://localhost:8080/v1 → http://elsewhere.example/v1" in message and "API key replaced" in message
    history = manager.get(reverse("admin:agent_endpoint_history", args=[keyed.pk])).content.decode()
    assert "http://elsewhere.example/v1" in history
    assert "sk-new" not in history + entry.change_message and "sk-stored" not in history + entry.change_message


def test_the_history_says_when_a_move_removed_the_key(manager: Any, keyed: Endpoint) -> None:
    change(manager, keyed, base_url="http://elsewhere.example/v1")
    assert "stored API key removed" in LogEntry.objects.get(object_id=str(keyed.pk)).get_change_message()


def test_without_manage_endpoints_an_endpoint_cannot_be_added_changed_or_deleted(staff: Any, keyed: Endpoint) -> None:
    assert staff.post(reverse("admin:agent_endpoint_add"), form_data(name="mine")).status_code == 403
    assert change(staff, keyed, base_url="http://attacker.example/v1").status_code == 403
    assert staff.post(reverse("admin:agent_endpoint_delete", args=[keyed.pk]), {"post": "yes"}).status_code == 403
    keyed.refresh_from_db()
    assert keyed.base_url == "http://localhost:8080/v1" and Endpoint.objects.count() == 1


def test_without_manage_endpoints_the_endpoint_page_is_read_only_and_masks_the_key(staff: Any) -> None:
    endpoint = EndpointFactory(name="e", base_url="http://localhost:8080/v1", model="m", api_key="sk-live-abcdefgh1234")
    response = staff.get(reverse("admin:agent_endpoint_change", args=[endpoint.pk]))
    page = response.content.decode()
    assert response.status_code == 200 and "sk-live-abcdefgh1234" not in page and "••••1234" in page
    assert 'name="base_url"' not in page


def test_without_manage_endpoints_the_sites_endpoints_cannot_be_changed(staff: Any, endpoint: Endpoint) -> None:
    mine = EndpointFactory(name="mine", base_url="http://attacker.example/v1", model="m")
    row = AgentSettings.current()
    response = staff.post(
        reverse("admin:agent_agentsettings_change", args=[row.pk]),
        {"enabled": "on", "default_endpoint": mine.pk, "picture_endpoint": mine.pk, "selectable_endpoints": [mine.pk]},
    )
    assert response.status_code == 302  # the rest of the page is theirs to save
    row.refresh_from_db()
    assert (row.default_endpoint, row.picture_endpoint, list(row.selectable_endpoints.all())) == (endpoint, None, [])


def test_with_manage_endpoints_the_sites_endpoints_can_be_changed(manager: Any, endpoint: Endpoint) -> None:
    other = EndpointFactory(name="other", base_url="http://localhost:1/v1", model="m")
    row = AgentSettings.current()
    response = manager.post(
        reverse("admin:agent_agentsettings_change", args=[row.pk]),
        {"enabled": "on", "default_endpoint": other.pk, "selectable_endpoints": [other.pk]},
    )
    assert response.status_code == 302
    row.refresh_from_db()
    assert (row.default_endpoint, list(row.selectable_endpoints.all())) == (other, [other])


def test_without_manage_endpoints_a_users_endpoint_cannot_be_set(staff: Any, user: Any, endpoint: Endpoint) -> None:
    mine = EndpointFactory(name="mine", base_url="http://attacker.example/v1", model="m")
    row = UserSettingsFactory(user=user)
    response = staff.post(
        reverse("admin:agent_usersettings_change", args=[row.pk]),
        {"user": user.pk, "endpoint": mine.pk, "picture_endpoint": mine.pk, "language": "", "enabled": "false"},
    )
    assert response.status_code == 302
    row.refresh_from_db()
    assert (row.endpoint, row.picture_endpoint, row.enabled) == (None, None, False)
