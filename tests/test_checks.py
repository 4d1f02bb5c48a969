"""System checks (agent/checks/): one id per kind of mistake, in ``settings.AGENT`` and in the site around it."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from celery import Celery, _state
from channels.auth import AuthMiddlewareStack
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator, OriginValidator
from django.conf import settings
from django.core import checks
from django.core.files.storage import FileSystemStorage
from django.core.management import call_command
from django.middleware.locale import LocaleMiddleware
from django.test import override_settings
from django.urls import path

from agent.checks.services import check_channel_layer_reaches_workers
from agent.checks.settings import check_agent_settings, check_attachment_storage, check_session_write_modules
from agent.checks.site import check_locale_middleware, check_login_url, check_websocket_route
from agent.routing import websocket_urlpatterns
from agent.web.consumers import AgentConsumer


def ids_for(agent: Any) -> list[str]:
    with override_settings(AGENT=agent):
        return [error.id for error in check_agent_settings()]


def agent_with(**overrides: Any) -> dict[str, Any]:
    return {**settings.AGENT, **overrides}


def test_the_test_settings_pass_every_check() -> None:
    assert ids_for(settings.AGENT) == []


def test_an_empty_agent_dict_passes_every_check() -> None:
    assert ids_for({}) == []


@pytest.mark.parametrize("agent", [["HISTORY_CHARS"], "HISTORY_CHARS=5", None], ids=["list", "str", "none"])
def test_e001_agent_that_is_not_a_dict(agent: Any) -> None:
    assert ids_for(agent) == ["agent.E001"]


def test_e002_an_unknown_key() -> None:
    assert ids_for(agent_with(HISTORY_CHARZ=10)) == ["agent.E002"]


@pytest.mark.parametrize("value", [0, -5, "100", 1.5, True, None], ids=repr)
def test_e003_a_count_that_is_not_a_positive_int(value: Any) -> None:
    assert ids_for(agent_with(HISTORY_CHARS=value)) == ["agent.E003"]


@pytest.mark.parametrize("value", [-1, -0.01, "5", True, None], ids=repr)
def test_e004_a_cap_that_is_not_a_number_at_least_zero(value: Any) -> None:
    assert ids_for(agent_with(DAILY_COST_PER_USER=value)) == ["agent.E004"]


@pytest.mark.parametrize("value", [0, 2.5])
def test_a_zero_or_fractional_cost_cap_is_valid(value: Any) -> None:
    assert ids_for(agent_with(DAILY_COST_PER_USER=value)) == []


@pytest.mark.parametrize("name", ["MAX_STORED_BYTES_PER_USER", "NEW_CHATS_PER_MINUTE", "UPLOADS_PER_MINUTE"])
def test_e004_a_quota_below_zero(name: str) -> None:
    assert ids_for(agent_with(**{name: -1})) == ["agent.E004"]
    assert ids_for(agent_with(**{name: 0})) == []


@pytest.mark.parametrize("value", [-1, "20MB", 1.5, True], ids=repr)
def test_e010_a_request_body_limit_that_is_not_none_or_an_int_at_least_zero(value: Any) -> None:
    assert ids_for(agent_with(MAX_REQUEST_BYTES=value)) == ["agent.E012"]


@pytest.mark.parametrize("renew, lease", [(30, 30), (40, 30)])
def test_e005_lock_renewal_not_shorter_than_the_lease(renew: int, lease: int) -> None:
    assert ids_for(agent_with(LOCK_RENEW_S=renew, LOCK_LEASE_S=lease)) == ["agent.E005"]


@pytest.mark.parametrize("value", [0, -100, 0.5], ids=repr)
def test_e003_a_stream_interval_that_is_not_a_positive_int(value: Any) -> None:
    assert ids_for(agent_with(STREAM_INTERVAL_MS=value)) == ["agent.E003"]


def test_a_lock_lease_that_is_not_an_int_is_e003_not_a_crash() -> None:
    assert ids_for(agent_with(LOCK_LEASE_S="30")) == ["agent.E003"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"IMPERSONATION_DETECTOR": "nowhere.detector"},
        {"IMPERSONATION_DETECTOR": "agent.access.no_such_function"},
        {"SCOPE_CHECKS": ["tests.test_checks.missing_check"]},
        {"USAGE_SINKS": ["no-dots"]},
        {"SCOPE_CHECKS": [42]},
    ],
    ids=["detector_module", "detector_attr", "scope_check", "usage_sink", "not_a_string"],
)
def test_e006_a_dotted_path_that_cannot_be_imported(overrides: dict[str, Any]) -> None:
    assert ids_for(agent_with(**overrides)) == ["agent.E006"]


def test_importable_dotted_paths_pass() -> None:
    agent = agent_with(
        IMPERSONATION_DETECTOR="agent.access.hijack_detector", SCOPE_CHECKS=["tests.access.test_ladder.passes"]
    )
    assert ids_for(agent) == []


@pytest.mark.parametrize("value", ["notes", [1], None], ids=repr)
def test_e007_session_write_modules_not_a_list_of_names(value: Any) -> None:
    assert ids_for(agent_with(SESSION_WRITE_MODULES=value)) == ["agent.E007"]


@pytest.mark.parametrize("value", [0, -1, "90", True], ids=repr)
def test_e008_retention_days_not_none_nor_a_positive_int(value: Any) -> None:
    assert ids_for(agent_with(RETENTION_DAYS=value)) == ["agent.E008"]


@pytest.mark.parametrize("value", ["", "  ", None, ["AGENT_KEY_"]], ids=repr)
def test_e010_api_key_env_prefix_that_is_empty_or_not_a_string(value: Any) -> None:
    assert ids_for(agent_with(API_KEY_ENV_PREFIX=value)) == ["agent.E010"]


def test_an_api_key_env_prefix_of_the_sites_own_passes() -> None:
    assert ids_for(agent_with(API_KEY_ENV_PREFIX="SITE_MODEL_")) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CAPTURE_CONTENT", "yes"),
        ("TASK_QUEUE", ""),
        ("ATTACHMENT_STORAGE", None),
        ("LOGOUT_URL", 5),
        ("ACCEPTED_TYPES", ["text/plain", "application/x-msdownload"]),
        ("ACCEPTED_TYPES", "text/plain"),
        ("STARTER_SUGGESTIONS", "Hello"),
        ("STARTER_SUGGESTIONS", ["Hello", 1]),
    ],
    ids=repr,
)
def test_e018_a_flag_name_or_list_of_types_of_the_wrong_shape(name: str, value: Any) -> None:
    assert ids_for(agent_with(**{name: value})) == ["agent.E018"]


@pytest.mark.parametrize("name", ["EXTRACTION_TIMEOUT_S", "PICTURE_MAX_PX", "UNLINKED_FILES_MAX_AGE_S"])
def test_every_setting_is_checked_by_its_own_rule(name: str) -> None:
    """Settings once left out of the checks' hand-kept lists are checked too: each names its rule."""
    assert ids_for(agent_with(**{name: 0})) == ["agent.E003"]


def test_a_setting_that_follows_another_is_checked_only_when_set() -> None:
    assert ids_for(agent_with(HISTORY_CHARS=0)) == ["agent.E003"]  # not again for ATTACHMENT_TEXT_CHARS
    assert ids_for(agent_with(ATTACHMENT_TEXT_CHARS=0)) == ["agent.E003"]


@pytest.mark.parametrize("value", [None, 90])
def test_retention_days_none_or_positive_passes(value: Any) -> None:
    assert ids_for(agent_with(RETENTION_DAYS=value)) == []


def test_the_checks_are_registered_with_django(db: Any) -> None:
    with override_settings(AGENT=agent_with(HISTORY_CHARZ=1)):
        assert "agent.E002" in [e.id for e in checks.run_checks()]


def ids_of(check: Callable[..., list[Any]], **overrides: Any) -> list[str]:
    with override_settings(**overrides):
        return [message.id for message in check()]


def test_the_test_site_passes_every_check_of_the_app_but_its_one_folder_of_files(db: Any) -> None:
    assert [message.id for message in checks.run_checks(tags=["agent"])] == ["agent.W007"]


# agent.W002: the in-memory channel layer with a worker in another process

IN_MEMORY_LAYER = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def celery_app_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Celery]]:
    """``celery_app_on(url)``: the site's Celery app on that broker, made current as a site's ``__init__`` does."""
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)  # Celery lets it override every app's broker
    previous = _state._tls.current_app
    yield lambda url: Celery("checked-site", broker=url, set_as_current=True)
    _state._set_current_app(previous)


def test_w002_in_memory_layer_with_a_broker_in_settings_that_is_not_memory(celery_app_on: Any) -> None:
    celery_app_on("memory://")

    assert ids_of(
        check_channel_layer_reaches_workers, CHANNEL_LAYERS=IN_MEMORY_LAYER, CELERY_BROKER_URL="redis://redis:6379/0"
    ) == ["agent.W002"]


def test_w002_in_memory_layer_with_the_current_celery_apps_broker_not_memory(celery_app_on: Any) -> None:
    celery_app_on("amqp://guest@rabbit//")

    assert ids_of(
        check_channel_layer_reaches_workers, CHANNEL_LAYERS=IN_MEMORY_LAYER, CELERY_BROKER_URL="memory://"
    ) == ["agent.W002"]


def test_w002_names_the_brokers_scheme_never_its_password(celery_app_on: Any) -> None:
    celery_app_on("memory://")

    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER, CELERY_BROKER_URL="redis://:s3cret@redis:6379/0"):
        [warning] = check_channel_layer_reaches_workers()

    assert "redis://" in warning.msg and "s3cret" not in warning.msg + warning.hint
    assert "RedisChannelLayer" in warning.hint


def test_in_memory_layer_with_memory_brokers_everywhere_passes(celery_app_on: Any) -> None:
    celery_app_on("memory://")

    assert (
        ids_of(check_channel_layer_reaches_workers, CHANNEL_LAYERS=IN_MEMORY_LAYER, CELERY_BROKER_URL="memory://") == []
    )


def test_a_redis_channel_layer_with_a_redis_broker_passes() -> None:
    redis_layer = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}
    warnings = ids_of(check_channel_layer_reaches_workers, CHANNEL_LAYERS=redis_layer, CELERY_BROKER_URL="redis://r/0")

    assert warnings == []


# agent.W003 / agent.W004: SESSION_WRITE_MODULES against the registered write tools


def preview(ctx: Any, **args: Any) -> dict[str, Any]:
    return {}


def test_w003_a_listed_module_that_no_write_tool_uses_with_a_hint_naming_the_known_modules() -> None:
    with override_settings(AGENT=agent_with(SESSION_WRITE_MODULES=["notes", "mysite.notes"])):
        [warning] = check_session_write_modules()

    assert warning.id == "agent.W003"
    assert "'mysite.notes'" in warning.msg
    assert "'notes'" in warning.hint and "did you mean 'notes'?" in warning.hint


def test_w003_a_module_of_read_tools_only_is_not_a_write_module(declare: Any) -> None:
    declare(preview, name="t_billing_read", kind="read", module="billing")

    assert ids_of(check_session_write_modules, AGENT=agent_with(SESSION_WRITE_MODULES=["notes", "billing"])) == [
        "agent.W003"
    ]


def test_w004_a_write_tool_whose_module_is_not_listed(declare: Any) -> None:
    declare(preview, name="t_billing_write", kind="write", module="billing", preview=preview)

    [warning] = check_session_write_modules()

    assert warning.id == "agent.W004"
    assert "'t_billing_write'" in warning.msg and "'billing'" in warning.msg
    assert "'billing'" in warning.hint


def test_write_modules_matching_the_tools_pass(declare: Any) -> None:
    declare(preview, name="t_billing_write", kind="write", module="billing", preview=preview)

    assert ids_of(check_session_write_modules, AGENT=agent_with(SESSION_WRITE_MODULES=["notes", "billing"])) == []


def test_write_modules_that_are_not_a_list_are_left_to_e007() -> None:
    assert ids_of(check_session_write_modules, AGENT=agent_with(SESSION_WRITE_MODULES="notes")) == []


# agent.W005: the consumer's websocket route under ASGI_APPLICATION


async def http_app(scope: Any, receive: Any, send: Any) -> None:
    """Stands in for Django's ASGI handler."""


class SiteConsumer(AgentConsumer):
    """A site's own subclass of the consumer."""


site_stack = ProtocolTypeRouter(
    {"http": http_app, "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))}
)
nested_routers = ProtocolTypeRouter(
    {"websocket": OriginValidator(URLRouter([path("ws/", URLRouter([path("agent/", SiteConsumer.as_asgi())]))]), ["*"])}
)
http_only = ProtocolTypeRouter({"http": http_app})
consumer_under_http = ProtocolTypeRouter({"http": URLRouter(websocket_urlpatterns)})
another_consumer = ProtocolTypeRouter(
    {"websocket": AuthMiddlewareStack(URLRouter([path("ws/agent/", AsyncWebsocketConsumer.as_asgi())]))}
)


@pytest.mark.parametrize("application", ["tests.asgi.application", "site_stack", "nested_routers"])
def test_a_websocket_route_to_the_consumer_passes(application: str) -> None:
    if "." not in application:
        application = f"{__name__}.{application}"

    assert ids_of(check_websocket_route, ASGI_APPLICATION=application) == []


@pytest.mark.parametrize("application", ["http_app", "http_only", "consumer_under_http", "another_consumer"])
def test_w005_no_websocket_route_to_the_consumer(application: str) -> None:
    with override_settings(ASGI_APPLICATION=f"{__name__}.{application}"):
        [warning] = check_websocket_route()

    assert warning.id == "agent.W005"
    assert "AgentConsumer" in warning.msg and "websocket_urlpatterns" in warning.hint


@pytest.mark.parametrize("value", [None, ""])
def test_w005_asgi_application_not_set(value: Any) -> None:
    with override_settings(ASGI_APPLICATION=value):
        [warning] = check_websocket_route()

    assert warning.id == "agent.W005" and "ASGI_APPLICATION is not set" in warning.msg


@pytest.mark.parametrize(
    "application, error",
    [
        (f"{__name__}.no_such_application", "ImportError"),
        ("tests.checks.asgi_before_setup.application", "ImproperlyConfigured"),
    ],
)
def test_w005_an_asgi_application_that_cannot_be_imported_is_reported_not_raised(application: str, error: str) -> None:
    stderr = io.StringIO()

    with override_settings(ASGI_APPLICATION=application):
        call_command("check", tag=["agent"], stderr=stderr, stdout=io.StringIO())

    assert "agent.W005" in stderr.getvalue()
    assert f"cannot be imported ({error}" in stderr.getvalue()


# agent.W006: several languages without LocaleMiddleware

THREE_LANGUAGES = [("en", "English"), ("ru", "Русский"), ("et", "Eesti")]
WITHOUT_LOCALE = [m for m in settings.MIDDLEWARE if m != "django.middleware.locale.LocaleMiddleware"]


class SiteLocaleMiddleware(LocaleMiddleware):
    """A site's own subclass of Django's LocaleMiddleware."""


def test_w006_several_languages_without_locale_middleware() -> None:
    assert ids_of(check_locale_middleware, LANGUAGES=THREE_LANGUAGES, MIDDLEWARE=WITHOUT_LOCALE) == ["agent.W006"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"LANGUAGES": THREE_LANGUAGES},
        {"LANGUAGES": THREE_LANGUAGES, "MIDDLEWARE": [*WITHOUT_LOCALE, f"{__name__}.SiteLocaleMiddleware"]},
        {"LANGUAGES": [("en", "English")], "MIDDLEWARE": WITHOUT_LOCALE},
    ],
    ids=["locale_middleware", "its_subclass", "one_language"],
)
def test_locale_middleware_or_one_language_passes(overrides: dict[str, Any]) -> None:
    assert ids_of(check_locale_middleware, **overrides) == []


# agent.E009: LOGIN_URL that does not resolve


def test_e009_login_url_that_names_no_url() -> None:
    with override_settings(LOGIN_URL="signin"):
        [error] = check_login_url()

    assert error.id == "agent.E009" and "'signin'" in error.msg


@pytest.mark.parametrize("login_url", ["login", "/accounts/login/", "https://sso.example.com/login"])
def test_a_login_url_name_or_path_passes(login_url: str) -> None:
    assert ids_of(check_login_url, LOGIN_URL=login_url) == []


# Migration state: nothing of ours follows the host's settings


@pytest.mark.parametrize("languages", ["de,fr", "unset"])
def test_makemigrations_finds_no_change_whatever_the_sites_languages(languages: str) -> None:
    """A host's ``makemigrations`` must never write a migration into the installed app."""
    result = subprocess.run(
        [sys.executable, "-m", "django", "makemigrations", "--check", "--dry-run", "--skip-checks", "agent"],
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.checks.other_languages", "AGENT_TEST_LANGUAGES": languages},
        capture_output=True,
        text=True,
        timeout=90,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "No changes detected" in result.stdout


# agent.W007: attachments in a folder, which every host must then share; agent.E011: no such storage


def storages_with(**aliases: Any) -> dict[str, Any]:
    return {**settings.STORAGES, **{alias: {"BACKEND": backend} for alias, backend in aliases.items()}}


class SiteFolderStorage(FileSystemStorage):
    """A site's own folder storage."""


@pytest.mark.parametrize("backend", ["django.core.files.storage.FileSystemStorage", f"{__name__}.SiteFolderStorage"])
def test_w007_attachments_in_a_folder(backend: str) -> None:
    with override_settings(STORAGES=storages_with(default=backend)):
        [warning] = check_attachment_storage()

    assert warning.id == "agent.W007" and "FileSystemStorage" in warning.msg
    assert "S3" in warning.hint and "SILENCED_SYSTEM_CHECKS" in warning.hint


def test_w007_looks_at_the_storage_the_attachments_use() -> None:
    in_memory = storages_with(files="django.core.files.storage.InMemoryStorage")
    assert ids_of(check_attachment_storage, STORAGES=in_memory, AGENT=agent_with(ATTACHMENT_STORAGE="files")) == []
    folder = storages_with(files="django.core.files.storage.FileSystemStorage")
    assert ids_of(check_attachment_storage, STORAGES=folder, AGENT=agent_with(ATTACHMENT_STORAGE="files")) == [
        "agent.W007"
    ]


def test_no_w007_for_s3_through_django_storages() -> None:
    s3 = {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": {"bucket_name": "files", "region_name": "eu-north-1"}}
    assert ids_of(check_attachment_storage, STORAGES={**settings.STORAGES, "default": s3}) == []


def test_e010_attachment_storage_names_no_alias_of_storages() -> None:
    with override_settings(AGENT=agent_with(ATTACHMENT_STORAGE="attachments")):
        [error] = check_attachment_storage()

    assert error.id == "agent.E011" and "'attachments'" in error.msg and "'default'" in error.hint
