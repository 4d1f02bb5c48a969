"""System checks for ``settings.AGENT`` and the site around the app, each with its own id.

``manage.py check --tag agent`` runs them all; each mistake a new site makes
when it wires the app in gets its own id and a hint that says what to change.
"""

from __future__ import annotations

from typing import Any, TypeGuard
from urllib.parse import urlsplit

from channels.layers import InMemoryChannelLayer
from channels.routing import ProtocolTypeRouter, URLRouter
from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register
from django.core.checks import Warning as CheckWarning
from django.core.exceptions import ImproperlyConfigured
from django.core.files.storage import FileSystemStorage, InvalidStorageError, storages
from django.middleware.locale import LocaleMiddleware
from django.shortcuts import resolve_url
from django.urls import NoReverseMatch, reverse
from django.utils.module_loading import import_string

from ..access import OAUTH_SCOPE
from ..ai.providers import adapter_class
from ..conf import NAME, POSITIVE, AgentConf, agent_settings
from ..tools.registry import registry

TAG = "agent"


@register(TAG)
def check_agent_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    raw = getattr(settings, "AGENT", {})
    if not isinstance(raw, dict):
        return [Error("settings.AGENT must be a dict.", id="agent.E001")]
    errors: list[Error] = []
    for key in sorted(set(raw) - set(AgentConf.names())):
        errors.append(Error(f"Unknown key AGENT[{key!r}].", hint="Check its spelling.", id="agent.E002"))
    for rule, message in AgentConf.problems():
        errors.append(Error(message, hint=rule.hint, id=rule.check_id))
    renew, lease = agent_settings.LOCK_RENEW_S, agent_settings.LOCK_LEASE_S
    if POSITIVE.holds(renew) and POSITIVE.holds(lease) and renew >= lease:  # else E003 said it already
        errors.append(Error("AGENT['LOCK_RENEW_S'] must be shorter than AGENT['LOCK_LEASE_S'].", id="agent.E005"))
    return errors


@register(TAG)
def check_telegram_library(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """A site that configures its bot needs python-telegram-bot, which the app does not require."""
    if not agent_settings.TELEGRAM:
        return []
    try:
        import telegram  # noqa: F401
    except ImportError:
        return [
            Error(
                "AGENT['TELEGRAM'] is set, but python-telegram-bot is not installed.",
                hint='pip install "django-agent[telegram]"',
                id="agent.E020",
            )
        ]
    return []


@register(TAG)
def check_mcp_library(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """A site that serves MCP needs the official SDK, which the app does not require."""
    if agent_settings.MCP is None:
        return []
    try:
        import mcp  # noqa: F401
    except ImportError:
        return [
            Error(
                "AGENT['MCP'] is set, but the mcp SDK is not installed.",
                hint='pip install "django-agent[mcp]"',
                id="agent.E022",
            )
        ]
    return []


@register(TAG)
def check_mcp_oauth(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Signing MCP clients in with OAuth needs django-oauth-toolkit installed and migrated, the scope
    ``agent`` among its scopes, and the metadata at the site's root, where clients look for it."""
    if not isinstance(agent_settings.MCP, dict) or agent_settings.MCP.get("OAUTH") is not True:
        return []
    try:
        from oauth2_provider.settings import oauth2_settings
    except ImportError:
        message = "AGENT['MCP']['OAUTH'] is on, but django-oauth-toolkit is not installed."
        return [Error(message, hint='pip install "django-agent[oauth]"', id="agent.E023")]
    if not apps.is_installed("oauth2_provider"):
        message = "AGENT['MCP']['OAUTH'] is on, but 'oauth2_provider' is not in INSTALLED_APPS."
        return [Error(message, hint="Add it to INSTALLED_APPS and migrate (docs/mcp.md).", id="agent.E024")]
    found: list[CheckMessage] = []
    if OAUTH_SCOPE not in oauth2_settings.SCOPES:
        found.append(
            Error(
                f"AGENT['MCP']['OAUTH'] is on, but OAUTH2_PROVIDER['SCOPES'] has no {OAUTH_SCOPE!r} scope.",
                hint=f'OAUTH2_PROVIDER = {{"SCOPES": {{"{OAUTH_SCOPE}": "Use your assistant\'s tools", ...}}}}',
                id="agent.E025",
            )
        )
    try:
        at_root = reverse("mcp_oauth_server") == "/.well-known/oauth-authorization-server"
    except (NoReverseMatch, ImportError):  # not included; or the URLs cannot load (agent.E022 says why)
        at_root = False
    if not at_root:
        message = "MCP clients cannot find the authorization server at /.well-known/oauth-authorization-server."
        hint = 'Include agent.mcp.urls.well_known at the site\'s root: path("", include(well_known)).'
        found.append(CheckWarning(message, hint=hint, id="agent.W009"))
    return found


@register(TAG)
def check_channel_layer_reaches_workers(app_configs: Any = None, **kwargs: Any) -> list[CheckWarning]:
    """A worker's events reach the page through the channel layer; an in-memory one never leaves its process."""
    backend = getattr(settings, "CHANNEL_LAYERS", {}).get("default", {}).get("BACKEND")
    if not _is_subclass_at(backend, InMemoryChannelLayer):
        return []
    schemes = sorted({urlsplit(url).scheme for url in _celery_broker_urls()} - {"memory"})
    if not schemes:
        return []
    return [
        CheckWarning(
            "The in-memory channel layer cannot carry events from a Celery worker in another process "
            f"(the broker is {schemes[0]}://...): the chat page shows no answer until it is reloaded.",
            hint="Set CHANNEL_LAYERS['default'] to channels_redis.core.RedisChannelLayer on a Redis that "
            "the web and the worker processes both reach.",
            id="agent.W002",
        )
    ]


@register(TAG)
def check_session_write_modules(app_configs: Any = None, **kwargs: Any) -> list[CheckWarning]:
    """A module name must match ``@agent_tool(module=...)`` exactly, or its writes are hidden from sessions."""
    listed = agent_settings.SESSION_WRITE_MODULES
    if not isinstance(listed, (list, tuple)) or not all(isinstance(m, str) for m in listed):
        return []  # agent.E007 says it
    tools_by_module: dict[str, list[str]] = {}
    for tool in registry.all():
        if tool.kind == "write":
            tools_by_module.setdefault(str(tool.module), []).append(tool.name)
    known = sorted(tools_by_module)
    warnings = [
        CheckWarning(
            f"AGENT['SESSION_WRITE_MODULES'] lists {module!r}, which no registered write tool gives as its module.",
            hint=_known_modules_hint(module, known),
            id="agent.W003",
        )
        for module in listed
        if module not in tools_by_module
    ]
    warnings += [
        CheckWarning(
            f"The write tools {', '.join(map(repr, tools_by_module[module]))} belong to the module {module!r}, "
            "which AGENT['SESSION_WRITE_MODULES'] does not list: no session is offered them.",
            hint=f"Add {module!r} to AGENT['SESSION_WRITE_MODULES'], or silence agent.W004 if sessions "
            "must not write there.",
            id="agent.W004",
        )
        for module in known
        if module not in listed
    ]
    return warnings


@register(TAG)
def check_tools_left_out(app_configs: Any = None, **kwargs: Any) -> list[CheckWarning]:
    """What a site registered that could not become a tool (a viewset action that answers only HTML)."""
    return [
        CheckWarning(
            f"{what} is not offered to the assistant: {why}",
            hint="Leave it out of register_viewset(actions=...), or give it a JSON renderer; silence "
            "agent.W008 if it is meant for browsers alone.",
            id="agent.W008",
        )
        for what, why in sorted(registry.left_out.items())
    ]


@register(TAG, Tags.urls)
def check_websocket_route(app_configs: Any = None, **kwargs: Any) -> list[CheckWarning]:
    """The chat page's live updates need the consumer routed under the site's ASGI application."""
    path = getattr(settings, "ASGI_APPLICATION", None)
    if not path:
        return [
            _websocket_warning(
                "settings.ASGI_APPLICATION is not set: nothing serves the assistant's websocket.",
                hint="Set ASGI_APPLICATION to your ASGI module's application, e.g. 'mysite.asgi.application', "
                "and route the websocket there as the README's ASGI module does.",
            )
        ]
    try:
        application = import_string(path)
    except (ImportError, ImproperlyConfigured) as error:
        return [
            _websocket_warning(
                f"settings.ASGI_APPLICATION {path!r} cannot be imported ({type(error).__name__}: {error}), "
                "so the assistant's websocket cannot be served.",
                hint="In the ASGI module call django.core.asgi.get_asgi_application() first, then import "
                "Channels and agent.routing; see the README's ASGI module.",
            )
        ]
    from ..web.consumers import AgentConsumer  # here: every process loads checks at start-up, few need the web

    if _routes_to(application, AgentConsumer, seen=set()):
        return []
    return [_websocket_warning(f"No websocket route under {path!r} leads to agent.web.consumers.AgentConsumer.")]


@register(TAG, Tags.translation)
def check_locale_middleware(app_configs: Any = None, **kwargs: Any) -> list[CheckWarning]:
    """A site that speaks several languages needs LocaleMiddleware, or every request gets LANGUAGE_CODE."""
    overridden = settings.is_overridden("LANGUAGES")  # type: ignore[misc]  # LazySettings has it; its stubs do not
    if not overridden or len(settings.LANGUAGES) < 2:
        return []
    if any(_is_subclass_at(path, LocaleMiddleware) for path in settings.MIDDLEWARE):
        return []
    return [
        CheckWarning(
            f"settings.LANGUAGES lists {len(settings.LANGUAGES)} languages, but MIDDLEWARE has no LocaleMiddleware: "
            f"every page comes in LANGUAGE_CODE ({settings.LANGUAGE_CODE!r}), whatever the browser asks for.",
            hint="Add 'django.middleware.locale.LocaleMiddleware' to MIDDLEWARE, after SessionMiddleware "
            "and before CommonMiddleware.",
            id="agent.W006",
        )
    ]


@register(TAG, Tags.urls)
def check_login_url(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """The chat page sends a signed-out visitor to LOGIN_URL; a name that does not resolve fails the page."""
    try:
        resolve_url(settings.LOGIN_URL)
    except NoReverseMatch:
        return [
            Error(
                f"settings.LOGIN_URL {settings.LOGIN_URL!r} is neither a URL nor the name of one in ROOT_URLCONF: "
                "the chat page fails when it sends a signed-out visitor there.",
                hint="Set LOGIN_URL to a path such as '/accounts/login/', or to the name of a URL the site "
                "defines (include('django.contrib.auth.urls') defines 'login').",
                id="agent.E009",
            )
        ]
    return []


@register(TAG)
def check_attachment_storage(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Files are stored by one process and read by others: a folder must then be shared by every host."""
    alias = agent_settings.ATTACHMENT_STORAGE
    try:
        storage = storages[alias]
    except (InvalidStorageError, TypeError):
        return [
            Error(
                f"AGENT['ATTACHMENT_STORAGE'] is {alias!r}, which is not a key of settings.STORAGES.",
                hint=f"Use one of {', '.join(map(repr, getattr(settings, 'STORAGES', {})))}, or add {alias!r} "
                "to STORAGES.",
                id="agent.E011",
            )
        ]
    except ImportError:  # a backend that does not import: Django says so where it loads it
        return []
    if not isinstance(storage, FileSystemStorage):
        return []
    return [
        CheckWarning(
            f"Attachments are stored in a folder (STORAGES[{alias!r}] is a FileSystemStorage at "
            f"{storage.location!r}): a file uploaded through one host is unreadable to a worker on another "
            "and its download is not found there.",
            hint="On several hosts use an object store (S3 through django-storages: docs/operations.md, "
            "'Files on several hosts'), or mount this folder on every web and worker host. On one machine, "
            "add 'agent.W007' to SILENCED_SYSTEM_CHECKS.",
            id="agent.W007",
        )
    ]


@register(TAG)
def check_provider_adapter(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Every endpoint that names no adapter of its own calls through the site's: one that does not
    import would refuse all their calls."""
    path = agent_settings.PROVIDER_ADAPTER
    if not NAME.holds(path) or adapter_class(path) is not None:  # not a name at all: agent.E018 says it
        return []
    return [
        Error(
            f"AGENT['PROVIDER_ADAPTER'] names {path!r}, which is not an importable adapter class.",
            hint="Give the dotted path of a subclass of agent.ai.providers.OpenAICompatible, or leave the key "
            "out for that one.",
            id="agent.E017",
        )
    ]


def _celery_broker_urls() -> list[str]:
    """Every broker the site names: its settings, and the Celery app it made current in this process."""
    urls = [getattr(settings, name, None) for name in ("CELERY_BROKER_URL", "CELERY_BROKER")]
    app = _current_celery_app()
    if app is not None:
        urls.append(app.conf.broker_url)
    named = [url for value in urls if value for url in _as_list(value) if isinstance(url, str)]
    return list(dict.fromkeys(named))  # the app's broker is most often the settings' own: one check each


def _current_celery_app() -> Any:
    """The app the site created (``set_as_current``), never the fallback app Celery would make up on the spot."""
    from celery import _state

    return getattr(_state._tls, "current_app", None)


def _is_subclass_at(path: object, base: type) -> TypeGuard[str]:
    if not isinstance(path, str):
        return False
    try:
        found = import_string(path)
    except ImportError:  # other checks, or the first request, say so
        return False
    return isinstance(found, type) and issubclass(found, base)


def _known_modules_hint(module: str, known: list[str]) -> str:
    if not known:
        return "No write tool is registered: declare one with @agent_tool(kind='write', module=...) in a tools.py."
    hint = f"The registered write tools use the modules {', '.join(map(repr, known))}."
    if module.rsplit(".", 1)[-1] in known:
        hint += f" A module is the name given to @agent_tool(module=...): did you mean {module.rsplit('.', 1)[-1]!r}?"
    return hint


def _routes_to(application: Any, consumer: type, *, seen: set[int]) -> bool:
    """Walk Channels' routers and middleware (``inner``, ``application``, ``app``) down to the websocket routes."""
    if id(application) in seen:
        return False
    seen.add(id(application))
    found = getattr(application, "consumer_class", None)
    if isinstance(found, type) and issubclass(found, consumer):
        return True
    if isinstance(application, ProtocolTypeRouter):
        return _routes_to(application.application_mapping.get("websocket"), consumer, seen=seen)
    if isinstance(application, URLRouter):
        return any(_routes_to(route.callback, consumer, seen=seen) for route in application.routes)
    return any(
        _routes_to(getattr(application, name), consumer, seen=seen)
        for name in ("inner", "application", "app")
        if getattr(application, name, None) is not None
    )


def _websocket_warning(message: str, hint: str | None = None) -> CheckWarning:
    return CheckWarning(
        f"{message} The chat page gets no live updates.",
        hint=hint
        or "Route the websocket through agent.routing.websocket_urlpatterns: ProtocolTypeRouter({'http': ..., "
        "'websocket': AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))}). "
        "If a middleware of your own hides the route from this check, silence agent.W005.",
        id="agent.W005",
    )


def _as_list(value: Any) -> list[str]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


@register(TAG)
def check_channel_layer_timeout(app_configs: Any = None, **kwargs: Any) -> list[CheckWarning]:
    """channels-redis waits for events with a blocking read; a socket timeout no longer than it drops every socket."""
    from channels_redis.core import RedisChannelLayer

    from ..layers import blocking_read_s, cuts_blocking_read, redis_default_socket_timeout, socket_timeout_of

    warnings = []
    for alias, entry in (getattr(settings, "CHANNEL_LAYERS", None) or {}).items():
        path = entry.get("BACKEND") if isinstance(entry, dict) else None
        if not _is_subclass_at(path, RedisChannelLayer):
            continue
        backend = import_string(path)
        read = blocking_read_s(backend)
        hosts = (entry.get("CONFIG") or {}).get("hosts") or ["redis://localhost:6379"]
        for host in hosts if isinstance(hosts, (list, tuple)) else []:
            timeout = socket_timeout_of(host)
            if not cuts_blocking_read(timeout, backend):
                continue
            told = not (isinstance(host, dict) and "socket_timeout" in host) and "socket_timeout=" not in str(host)
            whose = " (the installed redis-py's default)" if told and timeout == redis_default_socket_timeout() else ""
            warnings.append(
                CheckWarning(
                    f"CHANNEL_LAYERS[{alias!r}] gives Redis a socket timeout of {timeout:g} s{whose}, too close to "
                    f"the layer's own {read:g} s blocking read for events: every idle websocket is dropped about "
                    f"{read:g} s after it opens and its tab misses what follows.",
                    hint="Build the entry with agent.layers.redis_channel_layer(REDIS_URL), or give each host "
                    f"a socket_timeout of at least {read + 1:g} s, e.g. {{'address': url, 'socket_timeout': "
                    f"{2 * read:g}}}.",
                    id="agent.W001",
                )
            )
    return warnings


CLUSTER_PROBE_TIMEOUT_S = 0.5
"""How long the Redis Cluster check waits for each server before it gives up quietly."""


@register(TAG)
def check_redis_is_not_a_cluster(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """channels-redis and Celery's Redis transport speak to one server; a Cluster answers them with MOVED and
    CROSSSLOT. Asked with ``INFO cluster``, briefly; a server this process cannot reach is left to the others."""
    from channels_redis.core import RedisChannelLayer

    errors = []
    for alias, entry in (getattr(settings, "CHANNEL_LAYERS", None) or {}).items():
        path = entry.get("BACKEND") if isinstance(entry, dict) else None
        if not _is_subclass_at(path, RedisChannelLayer):
            continue
        hosts = (entry.get("CONFIG") or {}).get("hosts") or []
        for host in hosts if isinstance(hosts, (list, tuple)) else []:
            if _is_redis_cluster(host):
                errors.append(_cluster_error(f"CHANNEL_LAYERS[{alias!r}]", _shown_address(host)))
    for url in _celery_broker_urls():
        if urlsplit(url).scheme in ("redis", "rediss") and _is_redis_cluster(url):
            errors.append(_cluster_error("Celery's broker", _shown_address(url)))
    return errors


def _is_redis_cluster(host: Any) -> bool:
    """Whether the server of a channels-redis host entry (or a URL) says ``cluster_enabled:1``; False unreachable."""
    import redis

    wait = CLUSTER_PROBE_TIMEOUT_S
    if isinstance(host, dict) and isinstance(host.get("address"), str):
        host = host["address"]
    try:
        if isinstance(host, str):
            client = redis.Redis.from_url(host, socket_timeout=wait, socket_connect_timeout=wait)
        elif isinstance(host, (list, tuple)) and len(host) == 2:
            client = redis.Redis(host=host[0], port=int(host[1]), socket_timeout=wait, socket_connect_timeout=wait)
        else:
            return False  # Sentinel names a single master; a host of another shape is channels-redis's to refuse
        with client:
            return bool(client.info("cluster").get("cluster_enabled"))
    except (redis.RedisError, OSError, ValueError):
        return False


def _shown_address(host: Any) -> str:
    """The server's host and port, never its password."""
    if isinstance(host, dict):
        host = host.get("address", "")
    if isinstance(host, (list, tuple)):
        return f"{host[0]}:{host[1]}"
    parts = urlsplit(str(host))
    return f"{parts.hostname}:{parts.port or 6379}"


def _cluster_error(what: str, address: str) -> Error:
    return Error(
        f"{what} points at a Redis Cluster node ({address}): channels-redis and Celery do not support Redis "
        "Cluster, and every command whose key lives on another node fails with MOVED or CROSSSLOT.",
        hint="Use one Redis server (a managed service's non-cluster mode), Redis Sentinel "
        "(agent.layers.redis_channel_layer('redis+sentinel://host:26379/mymaster/0')), or a list of "
        "separate servers as shards.",
        id="agent.E013",
    )
