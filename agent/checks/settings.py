"""System checks of ``settings.AGENT`` itself and of what its keys name: write modules, tools, the
attachments' storage, the provider adapter.

Apart from the site's wiring (``site``) and the services (``services``): these read the app's own
settings and its registry, never the network.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.core.checks import Warning as CheckWarning
from django.core.files.storage import FileSystemStorage, InvalidStorageError, storages

from ..ai.providers import adapter_class
from ..core.conf import NAME, POSITIVE, AgentConf, agent_settings
from ..tools.registry import registry
from . import TAG


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


def _known_modules_hint(module: str, known: list[str]) -> str:
    if not known:
        return "No write tool is registered: declare one with @agent_tool(kind='write', module=...) in a tools.py."
    hint = f"The registered write tools use the modules {', '.join(map(repr, known))}."
    if module.rsplit(".", 1)[-1] in known:
        hint += f" A module is the name given to @agent_tool(module=...): did you mean {module.rsplit('.', 1)[-1]!r}?"
    return hint
