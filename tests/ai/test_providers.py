"""The provider seam: the default adapter sends what the app always sent, a site's adapter named by
``AGENT["PROVIDER_ADAPTER"]`` or on an endpoint is the one used, and a path that is no adapter is
refused by the system check, by the endpoint form, and at the call."""

from __future__ import annotations

import sys
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from agent import turns
from agent.ai import AIError, complete
from agent.ai.providers import OpenAICompatible, Unimportable, adapter_class, adapter_for
from agent.checks.settings import check_agent_settings, check_provider_adapter
from agent.models import AIRequest, Endpoint
from agent.tasks import run_turn
from tests.support.factories import EndpointFactory
from tests.support.model_server import answer
from tests.support.site_adapters import TAG, NoTools, Tagged
from tests.support.turns import agent_conf

pytestmark = pytest.mark.django_db
MESSAGES = [{"role": "user", "content": "hello"}]
TOOLS = [{"type": "function", "function": {"name": "t", "description": "d", "parameters": {"type": "object"}}}]
TAGGED, NO_TOOLS = "tests.support.site_adapters.Tagged", "tests.support.site_adapters.NoTools"
NOT_ADAPTERS = [
    "tests.support.site_adapters.NotAnAdapter",  # a class, but no adapter
    "tests.support.site_adapters.Missing",  # no such name
    "tests.ai.no_such_module.Adapter",  # no such module
    "os.path",  # a module
    "Tagged",  # not a dotted path
]


def call(endpoint: Any, user: Any, **kwargs: Any) -> Any:
    return complete(endpoint, MESSAGES, user=user, source="agent", task="agent.chat", **kwargs)


def set_adapter(endpoint: Endpoint, path: str) -> None:
    endpoint.adapter = path
    endpoint.save(update_fields=["adapter"])


# -- the default ----------------------------------------------------------------------------


def test_the_default_adapter_sends_the_bodies_the_app_always_sent(endpoint, model_server, user):
    assert type(adapter_for(endpoint)) is OpenAICompatible
    call(endpoint, user)
    call(endpoint, user, tools=TOOLS)
    call(endpoint, user, on_chunk=lambda text: None)
    plain, with_tools, streamed = model_server.requests
    assert plain == {"model": "scripted-model", "messages": MESSAGES}
    assert with_tools == {"model": "scripted-model", "messages": MESSAGES, "tools": TOOLS}
    assert streamed == {**plain, "stream": True, "stream_options": {"include_usage": True}}


# -- a site's adapter --------------------------------------------------------------------------


def test_the_adapter_the_setting_names_builds_every_request_and_reads_its_usage(endpoint, model_server, user):
    billed = {"prompt_tokens": 100, "completion_tokens": 20, "billed_microdollars": 1234}
    model_server.push(answer("hi", usage=billed), answer("hi again", usage=billed))
    with agent_conf(PROVIDER_ADAPTER=TAGGED):
        whole = call(endpoint, user)
        streamed = call(endpoint, user, on_chunk=lambda text: None)
    assert [request["user"] for request in model_server.requests] == [TAG, TAG]
    assert model_server.requests[1]["stream"] is True
    assert whole.cost_usd == streamed.cost_usd == Decimal("0.001234")
    assert [row.cost_usd for row in AIRequest.objects.order_by("created_at")] == [Decimal("0.001234")] * 2


def test_an_endpoints_own_adapter_is_used_and_wins_over_the_setting(endpoint, model_server, user):
    other = EndpointFactory(name="other", base_url=model_server.base_url, model="other-model")
    set_adapter(endpoint, TAGGED)
    call(endpoint, user)
    call(other, user)  # names none: the site's default
    with agent_conf(PROVIDER_ADAPTER=TAGGED):
        set_adapter(other, "agent.ai.providers.OpenAICompatible")
        call(other, user)
    assert [request.get("user") for request in model_server.requests] == [TAG, None, None]
    assert isinstance(adapter_for(endpoint), Tagged) and adapter_for(endpoint).endpoint == endpoint


def test_a_turn_asks_the_adapter_whether_the_model_takes_tools(ref, chat, endpoint, model_server):
    assert endpoint.supports_tools
    set_adapter(endpoint, NO_TOOLS)
    model_server.push(answer("a plain answer"))
    run_turn(str(turns.start(ref, chat.pk, "hello", impersonated=False).pk))
    assert "tools" not in model_server.requests[0] and isinstance(adapter_for(endpoint), NoTools)


def test_an_endpoint_whose_stored_adapter_does_not_import_reaches_nobody(endpoint, model_server, user, caplog):
    set_adapter(endpoint, "tests.support.site_adapters.Missing")  # a row written past the form
    with pytest.raises(AIError) as refused:
        call(endpoint, user)
    assert refused.value.code == "endpoint_not_configured" and model_server.requests == []
    assert AIRequest.objects.get().error_code == "endpoint_not_configured"
    assert "tests.support.site_adapters.Missing" in caplog.text


# -- refusing what is no adapter ------------------------------------------------------------


@pytest.mark.parametrize("path", NOT_ADAPTERS)
def test_e017_a_setting_that_names_no_adapter_class(path: str) -> None:
    assert adapter_class(path) is None
    with agent_conf(PROVIDER_ADAPTER=path):
        errors = check_provider_adapter()
        assert check_agent_settings() == []
    assert [error.id for error in errors] == ["agent.E017"] and repr(path) in errors[0].msg


@pytest.mark.parametrize("path", ["agent.ai.providers.OpenAICompatible", TAGGED])
def test_an_adapter_class_passes_the_check(path: str) -> None:
    with agent_conf(PROVIDER_ADAPTER=path):
        assert check_provider_adapter() == []


def test_a_setting_that_is_no_name_at_all_is_e018_alone() -> None:
    with agent_conf(PROVIDER_ADAPTER=""):
        assert [error.id for error in check_agent_settings()] == ["agent.E018"]
        assert check_provider_adapter() == []


def endpoint_form(**changes: Any) -> dict[str, Any]:
    return {
        "name": "e",
        "base_url": "http://localhost:8080/v1",
        "model": "m",
        "input_price_per_mtok": "0",
        "output_price_per_mtok": "0",
        "audio_price_per_minute": "0",
        "timeout_s": "60",
        "enabled": "on",
        **changes,
    }


@pytest.fixture
def manager(make_user: Any) -> Client:
    client = Client()
    client.force_login(make_user("agent.manage_agent", "agent.manage_endpoints", is_staff=True))
    return client


@pytest.mark.parametrize("path", NOT_ADAPTERS)
def test_the_endpoint_form_refuses_an_adapter_that_is_no_adapter_class(manager: Client, path: str) -> None:
    response = manager.post(reverse("admin:agent_endpoint_add"), endpoint_form(adapter=path))
    assert response.status_code == 200 and not Endpoint.objects.exists()
    assert response.context["adminform"].form.errors["adapter"] == [f"{path} is not an importable adapter class."]


@pytest.mark.parametrize("path", ["", f"  {TAGGED} "])
def test_the_endpoint_form_saves_an_adapter_class_or_none(manager: Client, path: str) -> None:
    response = manager.post(reverse("admin:agent_endpoint_add"), endpoint_form(adapter=path))
    assert response.status_code == 302 and Endpoint.objects.get().adapter == path.strip()


def test_an_adapter_outside_the_sites_code_is_refused_without_importing_it(
    manager: Client, tmp_path: Any, monkeypatch: Any, endpoint: Endpoint
) -> None:
    # given a module outside the site's code whose import leaves a mark
    (tmp_path / "probe_adapter_module.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_suffix('.ran').touch()\nclass Adapter: pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = "probe_adapter_module.Adapter"
    # when staff name it on the endpoint form, and a row names it past the form
    response = manager.post(reverse("admin:agent_endpoint_add"), endpoint_form(name="probe", adapter=path))
    set_adapter(endpoint, path)
    used = adapter_for(endpoint)
    # then it is refused both times, and its code never ran
    assert response.status_code == 200 and not Endpoint.objects.filter(name="probe").exists()
    assert response.context["adminform"].form.errors["adapter"] == [
        f"{path} is not in the site's code: name a class in an installed app or the site's own package."
    ]
    assert type(used) is Unimportable  # the stand-in whose calls are refused
    assert not (tmp_path / "probe_adapter_module.ran").exists()
    assert "probe_adapter_module" not in sys.modules
