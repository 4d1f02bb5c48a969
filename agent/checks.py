"""System checks for ``settings.AGENT``, each with its own id."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register
from django.utils.module_loading import import_string

from .conf import AgentConf, agent_settings

_POSITIVE_INTS = [
    "HISTORY_CHARS", "TOOL_RESULT_CHARS", "MAX_TOOL_ROUNDS", "MAX_TOOL_CALLS_PER_ROUND",
    "TURN_DEADLINE_S", "STOP_GRACE_S", "LOCK_LEASE_S", "LOCK_RENEW_S", "QUEUED_REQUEUE_S",
    "CONFIRMATION_TTL_S", "MAX_TURNS_PER_USER", "MAX_FILES_PER_MESSAGE", "MAX_FILE_BYTES",
    "OFF_PURPOSE_LIMIT", "CHATS_PAGE", "CHATS_PAGE_MAX", "MESSAGES_PAGE", "MESSAGES_PAGE_MAX",
    "AUTO_TITLE_CHARS", "MAX_TITLE_CHARS", "MAX_INSTRUCTIONS_CHARS", "WS_MAX_FRAME_BYTES",
    "WS_FRAMES_PER_10S", "PURGE_DELETED_DAYS",
]
_NON_NEGATIVE = ["DAILY_COST_PER_USER", "DAILY_TURNS_PER_USER", "DAILY_COST_SITE", "MODEL_MAX_RETRIES"]


@register()
def check_agent_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    raw = getattr(settings, "AGENT", {})
    if not isinstance(raw, dict):
        return [Error("settings.AGENT must be a dict.", id="agent.E001")]
    errors: list[Error] = []
    for key in sorted(set(raw) - set(AgentConf.names())):
        errors.append(Error(f"Unknown key AGENT[{key!r}].", hint="Check its spelling.", id="agent.E002"))
    for name in _POSITIVE_INTS:
        value = getattr(agent_settings, name)
        if not _is_positive_int(value):
            errors.append(Error(f"AGENT[{name!r}] must be a positive integer, not {value!r}.", id="agent.E003"))
    for name in _NON_NEGATIVE:
        value = getattr(agent_settings, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            errors.append(Error(f"AGENT[{name!r}] must be a number ≥ 0, not {value!r}.", id="agent.E004"))
    renew, lease = agent_settings.LOCK_RENEW_S, agent_settings.LOCK_LEASE_S
    if _is_positive_int(renew) and _is_positive_int(lease) and renew >= lease:  # else E003 said it already
        errors.append(Error("AGENT['LOCK_RENEW_S'] must be shorter than AGENT['LOCK_LEASE_S'].", id="agent.E005"))
    for name in ["IMPERSONATION_DETECTOR", "SCOPE_CHECKS", "USAGE_SINKS"]:
        for path in _as_list(getattr(agent_settings, name)):
            try:
                import_string(path)
            except (ImportError, AttributeError):  # AttributeError: not a string at all
                errors.append(Error(f"AGENT[{name!r}] names {path!r}, which cannot be imported.", id="agent.E006"))
    modules = agent_settings.SESSION_WRITE_MODULES
    if not isinstance(modules, (list, tuple)) or not all(isinstance(m, str) for m in modules):
        errors.append(Error("AGENT['SESSION_WRITE_MODULES'] must be a list of module names.", id="agent.E007"))
    retention = agent_settings.RETENTION_DAYS
    if retention is not None and not _is_positive_int(retention):
        errors.append(Error("AGENT['RETENTION_DAYS'] must be None or a positive integer.", id="agent.E008"))
    return errors


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _as_list(value: Any) -> list[str]:
    return list(value) if isinstance(value, (list, tuple)) else [value]
