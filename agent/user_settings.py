"""The user's own settings, "My assistant": what the panel shows and the
only door for what a user may change there, each call through the check ladder of ``agent.access``.

A user may write their instructions, their language and, from the allow-list only, their chat and
picture models. Caps, the allow-list and an endpoint set by staff are staff's.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from .access import Actor, Scope, authorize_session
from .ai import endpoints, providers
from .core.conf import agent_settings
from .limits import caps, quotas
from .models import AgentSettings, Endpoint, UserSettings
from .tools.executor import visible_for

WRITABLE = ("instructions", "language", "endpoint", "picture_endpoint", "speech_endpoint")
"""The keys ``update`` reads; every other key is ignored."""

SHOWN_LIMITS = (caps.COST_PER_USER, caps.TURNS_PER_USER, caps.OFF_PURPOSE, caps.COST_SITE)


def panel(actor: Actor, *, impersonated: bool) -> dict[str, Any]:
    """The panel's data: the models in effect and where each comes from, the models the user may
    pick, their instructions and language, their usage against the caps, and their quotas."""
    scope = authorize_session(actor, impersonated=impersonated)
    return _view(scope, scope.user_settings)


def update(actor: Actor, attrs: Any, *, impersonated: bool) -> dict[str, Any]:
    """Write the keys of ``attrs`` that a user may change, all or none; ValidationError by field.

    ``endpoint`` / ``picture_endpoint``: an endpoint id from the allow-list, or empty to follow the
    site again; refused when the allow-list is empty or staff set that endpoint.
    """
    scope = authorize_session(actor, impersonated=impersonated)
    if not isinstance(attrs, dict):
        raise ValidationError({"__all__": [_("The settings must be an object.")]})
    changes = {key: attrs[key] for key in WRITABLE if key in attrs}
    with transaction.atomic():
        own, _created = UserSettings.objects.select_for_update().get_or_create(user_id=scope.user_id)
        site = AgentSettings.current()
        errors: dict[str, list[str]] = {}
        for key, value in changes.items():
            try:
                _apply(own, key, value, site)
            except ValidationError as invalid:
                errors[key] = invalid.messages
        if errors:
            raise ValidationError(errors)
        own.save()
    return _view(scope, own)


def _apply(own: UserSettings, key: str, value: Any, site: AgentSettings) -> None:
    """Set one field on the row (unsaved) or raise ValidationError with its messages."""
    if key == "instructions":
        if not isinstance(value, str):
            raise ValidationError(_("The instructions must be text."))
        limit = agent_settings.MAX_INSTRUCTIONS_CHARS
        if len(value) > limit:
            raise ValidationError(_("At most %(max)d characters.") % {"max": limit})
        own.instructions = value
    elif key == "language":
        if value not in ("", *dict(settings.LANGUAGES)):
            raise ValidationError(_("This language is not offered."))
        own.language = value
    else:
        _pick(own, key, value, site)


def _pick(own: UserSettings, field: str, value: Any, site: AgentSettings) -> None:
    """A user's own pick: only from the allow-list, never over staff's choice."""
    allowed = endpoints.allowed_ids(site)
    if not allowed:
        raise ValidationError(_("Picking a model is not offered."))
    if _locked(own, field):
        raise ValidationError(_("Staff chose this model for you; ask them to change it."))
    if value in (None, ""):
        setattr(own, field, None)
        setattr(own, f"{field}_set_by", UserSettings.SetBy.NOBODY)
        return
    try:
        chosen = Endpoint.objects.get(pk=int(value), pk__in=allowed, enabled=True)
    except (Endpoint.DoesNotExist, TypeError, ValueError):
        raise ValidationError(_("This model cannot be picked.")) from None
    if field == "picture_endpoint" and not providers.adapter_for(chosen).sees_pictures():
        raise ValidationError(_("This model cannot see pictures."))
    if field == "speech_endpoint" and not chosen.supports_transcription:
        raise ValidationError(_("This model cannot turn speech into text."))
    setattr(own, field, chosen)
    setattr(own, f"{field}_set_by", UserSettings.SetBy.USER)


def _view(scope: Scope, own: UserSettings | None) -> dict[str, Any]:
    user = scope.user
    tools = len(visible_for(scope))
    site = AgentSettings.current()
    choices = endpoints.chosen(user, user_settings=own)
    pickable = list(site.selectable_endpoints.filter(enabled=True).order_by("name"))
    standings = caps.usage(user, only=SHOWN_LIMITS)
    return {
        "models": {
            "chat": choice_view(choices["chat"]),
            "pictures": choice_view(choices["pictures"], chat=choices["chat"], site=site),
            "speech": speech_view(choices["speech"]),
        },
        "picker": {
            "offered": bool(pickable),
            "endpoints": [endpoint_view(e) for e in pickable],
            "endpoint": _picked(own, "endpoint"),
            "picture_endpoint": _picked(own, "picture_endpoint"),
            "endpoint_locked": _locked(own, "endpoint"),
            "picture_endpoint_locked": _locked(own, "picture_endpoint"),
            "speech_endpoint": _picked(own, "speech_endpoint"),
            "speech_endpoint_locked": _locked(own, "speech_endpoint"),
        },
        "instructions": own.instructions if own else "",
        "max_instructions": agent_settings.MAX_INSTRUCTIONS_CHARS,
        "language": own.language if own else "",
        "languages": [[code, str(name)] for code, name in settings.LANGUAGES],
        "usage": [
            {**s.params(), "reached": s.reached, "message": caps.message(s.params()) if s.reached else None}
            for s in standings.values()
            if s.limit != caps.COST_SITE or s.reached  # the site's cap shows only when it stops this user
        ],
        "quotas": [
            {**q.params(numbers=True), "reached": q.reached, "text": quotas.panel_text(q)}
            for q in quotas.usage(user.pk)
        ],
        "tools": {
            "count": tools,
            "text": ngettext(
                "The assistant can use %(count)d tool of this site for you.",
                "The assistant can use %(count)d tools of this site for you.",
                tools,
            )
            % {"count": tools},
        },
    }


def endpoint_view(endpoint: Endpoint) -> dict[str, Any]:
    """What a user may see of an endpoint: never its URL or key."""
    adapter = providers.adapter_for(endpoint)
    return {
        "id": endpoint.pk,
        "name": endpoint.name,
        "model": endpoint.model,
        "supports_images": adapter.sees_pictures(),
        "supports_tools": adapter.takes_tools(),
        "supports_transcription": endpoint.supports_transcription,
    }


def choice_view(
    choice: endpoints.Choice, *, chat: endpoints.Choice | None = None, site: AgentSettings | None = None
) -> dict[str, Any]:
    """A model in effect, where it comes from and, for a fallback, why (with a phrase to show).

    For the pictures' model give ``chat`` (the chats' choice) and ``site``: pictures may go to the
    site's picture model, the user's own, or wherever chats go, and the phrase says which.
    """
    return {
        "endpoint": endpoint_view(choice.endpoint) if choice.endpoint is not None else None,
        "source": choice.source,
        "reason": choice.reason,
        "explanation": source_text(choice) if chat is None else picture_source_text(choice, chat, site),
    }


def speech_view(choice: endpoints.Choice) -> dict[str, Any]:
    """The speech model in effect: the user's own, the site's, or none (then the page has no microphone)."""
    if choice.endpoint is None:
        explanation = _("No speech model: the microphone is not offered.")
    elif choice.source == endpoints.PERSONAL:
        explanation = _("Your own model for speech.")
    elif choice.source == endpoints.FALLBACK:
        explanation = _("The site's model for speech: your own cannot be used now.")
    else:
        explanation = _("The site's model for speech.")
    return {
        "endpoint": endpoint_view(choice.endpoint) if choice.endpoint is not None else None,
        "source": choice.source,
        "reason": choice.reason,
        "explanation": explanation,
    }


def source_text(choice: endpoints.Choice) -> str:
    """Where the chats' model in effect comes from, in the active language."""
    if choice.source == endpoints.PERSONAL:
        return _("Your own model.")
    if choice.source == endpoints.DEFAULT:
        return _("The site's default model.")
    reasons = {
        endpoints.DISABLED: _("The site's default model: your own model is switched off."),
        endpoints.NOT_ALLOWED: _("The site's default model: your own model may no longer be picked."),
        endpoints.GONE: _("The site's default model: your own model was removed."),
    }
    return reasons.get(choice.reason, _("The site's default model."))


def picture_source_text(choice: endpoints.Choice, chat: endpoints.Choice, site: AgentSettings | None) -> str:
    """Where the pictures' model in effect comes from: named by whose model it is, not by the rule that chose it."""
    if choice == chat:
        return source_text(chat)  # no model for pictures anywhere: pictures go where chats go, for the same reason
    site_pictures = site.picture_endpoint if site is not None else None
    if choice.source == endpoints.PERSONAL:
        return _("Your own model for pictures.")
    if choice.endpoint is not None and site_pictures is not None and choice.endpoint.pk == site_pictures.pk:
        origin = _("The site's model for pictures")
    elif chat.source == endpoints.PERSONAL and choice.endpoint == chat.endpoint:
        origin = _("Your own model for chats")
    else:
        origin = _("The site's default model")
    if choice.source == endpoints.DEFAULT:
        return _("%(origin)s.") % {"origin": origin}
    reasons = {
        endpoints.DISABLED: _("your own model for pictures is switched off"),
        endpoints.NOT_ALLOWED: _("your own model for pictures may no longer be picked"),
        endpoints.GONE: _("your own model for pictures was removed"),
    }
    reason = reasons.get(choice.reason, "")
    return _("%(origin)s: %(reason)s.") % {"origin": origin, "reason": reason} if reason else f"{origin}."


def _picked(own: UserSettings | None, field: str) -> int | None:
    if own is None or getattr(own, f"{field}_set_by") != UserSettings.SetBy.USER:
        return None
    picked: int | None = getattr(own, f"{field}_id")
    return picked


def _locked(own: UserSettings | None, field: str) -> bool:
    """Staff chose it (a row from before anyone recorded who chose counts as staff's)."""
    return bool(
        own is not None
        and getattr(own, f"{field}_set_by") != UserSettings.SetBy.USER
        and getattr(own, f"{field}_id") is not None
    )
