"""System checks of the site's wiring around the app: the websocket's route under its ASGI
application, the middleware its languages need, the login page signed-out visitors are sent to.

Apart from ``settings`` because they read Django's own settings and the site's modules, not
``settings.AGENT``.
"""

from __future__ import annotations

from typing import Any

from channels.routing import ProtocolTypeRouter, URLRouter
from django.conf import settings
from django.core.checks import Error, Tags, register
from django.core.checks import Warning as CheckWarning
from django.core.exceptions import ImproperlyConfigured
from django.middleware.locale import LocaleMiddleware
from django.shortcuts import resolve_url
from django.urls import NoReverseMatch
from django.utils.module_loading import import_string

from . import TAG, is_subclass_at


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
    if any(is_subclass_at(path, LocaleMiddleware) for path in settings.MIDDLEWARE):
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
