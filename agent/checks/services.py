"""System checks of the services the app runs on: the channel layer that carries a worker's events
to the page, Redis (never a Cluster, with a socket timeout the layer's blocking read survives) and
Celery's broker.

Apart from ``settings`` and ``site`` because they look at the running services: the Redis check
asks each server, briefly.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.layers import InMemoryChannelLayer
from django.conf import settings
from django.core.checks import Error, register
from django.core.checks import Warning as CheckWarning
from django.utils.module_loading import import_string

from . import TAG, is_subclass_at


@register(TAG)
def check_channel_layer_reaches_workers(app_configs: Any = None, **kwargs: Any) -> list[CheckWarning]:
    """A worker's events reach the page through the channel layer; an in-memory one never leaves its process."""
    backend = getattr(settings, "CHANNEL_LAYERS", {}).get("default", {}).get("BACKEND")
    if not is_subclass_at(backend, InMemoryChannelLayer):
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


def _as_list(value: Any) -> list[str]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


@register(TAG)
def check_channel_layer_timeout(app_configs: Any = None, **kwargs: Any) -> list[CheckWarning]:
    """channels-redis waits for events with a blocking read; a socket timeout no longer than it drops every socket."""
    from channels_redis.core import RedisChannelLayer

    from ..live.channel_layer import (
        blocking_read_s,
        cuts_blocking_read,
        redis_default_socket_timeout,
        socket_timeout_of,
    )

    warnings = []
    for alias, entry in (getattr(settings, "CHANNEL_LAYERS", None) or {}).items():
        path = entry.get("BACKEND") if isinstance(entry, dict) else None
        if not is_subclass_at(path, RedisChannelLayer):
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
        if not is_subclass_at(path, RedisChannelLayer):
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
