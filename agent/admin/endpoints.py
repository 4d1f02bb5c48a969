"""Staff pages for where chats go: the endpoints, the site's settings and each user's settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from ..ai import AIError, complete, providers
from ..ai import endpoints as endpoint_rules
from ..core.conf import agent_settings
from ..limits import caps
from ..models import AgentSettings, Endpoint, UserSettings
from ..tools import catalogue
from .permissions import (
    SITE_ENDPOINT_FIELDS,
    USER_ENDPOINT_FIELDS,
    ManageAgentMixin,
    may_manage_endpoints,
    may_read_content,
)

if TYPE_CHECKING:  # Django's admin and form classes are generic in its stubs only
    _EndpointFormBase = forms.ModelForm[Endpoint]
    _EndpointBase = admin.ModelAdmin[Endpoint]
    _AgentSettingsBase = admin.ModelAdmin[AgentSettings]
    _UserSettingsBase = admin.ModelAdmin[UserSettings]
else:
    _EndpointFormBase = forms.ModelForm
    _EndpointBase = _AgentSettingsBase = _UserSettingsBase = admin.ModelAdmin


class EndpointForm(_EndpointFormBase):
    """An endpoint's key never moves with it by accident: a new base URL drops the stored key unless
    this form gives a new one, and sending a variable's key to a new URL takes a tick."""

    base_url = forms.URLField(label=_("base URL"), max_length=500, assume_scheme="https")
    api_key = forms.CharField(
        label=_("API key"),
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text=_("Write-only: leave empty to keep the current key. A new base URL removes it unless one is given."),
    )
    clear_api_key = forms.BooleanField(label=_("Remove the stored key"), required=False)
    send_key_to_new_url = forms.BooleanField(label=_("Send the key in the variable to the new URL"), required=False)

    class Meta:
        model = Endpoint
        fields = "__all__"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_change = ""
        if "api_key_env" in self.fields:  # not on the read-only page
            self.fields["api_key_env"].help_text = _("Name of an environment variable holding the key: %(prefix)s…") % {
                "prefix": agent_settings.API_KEY_ENV_PREFIX
            }
        if self.instance.api_key_env:
            self.fields["send_key_to_new_url"].label = _("Send the key in $%(name)s to the new URL") % {
                "name": self.instance.api_key_env
            }

    def clean_adapter(self) -> str:
        path: str = self.cleaned_data["adapter"].strip()
        if "." in path and not providers.in_site_code(path):
            raise forms.ValidationError(
                _("%(path)s is not in the site's code: name a class in an installed app or the site's own package."),
                code="adapter_not_site_code",
                params={"path": path},
            )
        if path and providers.adapter_class(path) is None:
            raise forms.ValidationError(
                _("%(path)s is not an importable adapter class."), code="adapter_not_importable", params={"path": path}
            )
        return path

    def clean_api_key_env(self) -> str:
        name: str = self.cleaned_data["api_key_env"].strip()
        if name and not endpoint_rules.key_env_allowed(name):
            raise forms.ValidationError(
                _("Only a variable whose name starts with %(prefix)s may hold a key."),
                code="key_env_not_allowed",
                params={"prefix": agent_settings.API_KEY_ENV_PREFIX},
            )
        return name

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        stored = self.instance.api_key if self.instance.pk else ""
        supplied = data.get("api_key") or ""
        url = data.get("base_url")
        moved = bool(self.instance.pk) and url is not None and url != self.instance.base_url
        if supplied:
            data["api_key"], self.key_change = supplied, "replaced" if stored else "added"
        elif stored and (data.get("clear_api_key") or moved):
            data["api_key"], self.key_change = "", "removed"
        else:
            data["api_key"] = stored
        variable = data.get("api_key_env")
        if moved and variable and not supplied and not data.get("send_key_to_new_url"):
            self.add_error(
                "send_key_to_new_url",
                _("The key in $%(name)s would go to %(url)s: tick this to send it there, or clear the variable.")
                % {"name": variable, "url": url},
            )
        return data

    def change_summary(self) -> str:
        """What this save changed, for the admin's history: a new base URL and variable name with
        their old ones, and what happened to the stored key (never a key)."""
        parts = []
        for name in self.changed_data:
            if name in ("api_key", "clear_api_key", "send_key_to_new_url"):
                continue
            if name in ("base_url", "api_key_env"):
                old, new = self.initial.get(name) or "—", self.cleaned_data.get(name) or "—"
                parts.append(f"{self.fields[name].label}: {old} → {new}")
            else:
                parts.append(str(self.fields[name].label))
        key_changes = {
            "added": _("API key stored"),
            "replaced": _("API key replaced"),
            "removed": _("stored API key removed"),
        }
        if self.key_change:
            parts.append(str(key_changes[self.key_change]))
        if not parts:
            return str(_("No fields changed."))
        return str(_("Changed %(changes)s.") % {"changes": "; ".join(parts)})


@admin.register(Endpoint)
class EndpointAdmin(ManageAgentMixin, _EndpointBase):
    """Adding, changing and deleting endpoints takes ``agent.manage_endpoints`` too: an endpoint
    decides where users' chats and the site's keys go. Without it the page is read-only."""

    form = EndpointForm
    list_display = [
        "name",
        "model",
        "base_url",
        "key",
        "enabled",
        "supports_tools",
        "supports_images",
        "supports_streaming",
    ]
    list_filter = ["enabled"]
    search_fields = ["name", "model"]
    actions = ["test_call"]

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return may_manage_endpoints(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_manage_endpoints(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_manage_endpoints(request)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_fields(request, obj))
        if self.has_change_permission(request, obj):
            return fields
        # read-only shows each field's stored value: the key only masked, the form's ticks not at all
        fields = [name for name in fields if name not in ("clear_api_key", "send_key_to_new_url")]
        return ["key" if name == "api_key" else name for name in fields]

    def construct_change_message(self, request: HttpRequest, form: Any, formsets: Any, add: bool = False) -> Any:
        if add:
            return super().construct_change_message(request, form, formsets, add)
        return form.change_summary()

    @admin.display(description=_("API key"))
    def key(self, obj: Endpoint) -> str:
        if obj.api_key:
            return "••••" + obj.api_key[-4:] if len(obj.api_key) > 12 else "••••"
        return f"${obj.api_key_env}" if obj.api_key_env else "—"

    @admin.action(description=_("Make a test call"))
    def test_call(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> None:
        """Call each endpoint as a turn does (streamed where it streams); a server that refuses to
        stream but answers whole is named, so staff know to untick "supports streaming"."""
        for endpoint in queryset:
            try:
                answer = self._call(endpoint, request, streamed=True)
            except AIError as error:
                adapter = providers.adapter_for(endpoint)
                if adapter.streams() and adapter.refused_streaming(error) and self._answers_whole(endpoint, request):
                    text = _(
                        "%(name)s: refused to stream (%(status)s), but answers whole: untick “supports streaming”."
                    )
                    self.message_user(request, text % {"name": endpoint, "status": error.status}, messages.WARNING)
                    continue
                self.message_user(
                    request, _("%(name)s: failed (%(code)s)") % {"name": endpoint, "code": error.code}, messages.ERROR
                )
            else:
                self.message_user(
                    request,
                    _("%(name)s: answered in %(ms)d ms") % {"name": endpoint, "ms": answer.latency_ms},
                    messages.SUCCESS,
                )

    def _answers_whole(self, endpoint: Endpoint, request: HttpRequest) -> bool:
        try:
            self._call(endpoint, request, streamed=False)
        except AIError:
            return False
        return True

    @staticmethod
    def _call(endpoint: Endpoint, request: HttpRequest, *, streamed: bool) -> Any:
        return complete(
            endpoint,
            [{"role": "user", "content": "Reply with: ok"}],
            user=request.user,
            source="admin",
            task="agent.endpoint_test",
            on_chunk=(lambda text: None) if streamed else None,
        )


@admin.register(AgentSettings)
class AgentSettingsAdmin(ManageAgentMixin, _AgentSettingsBase):
    filter_horizontal = ["selectable_endpoints"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """Which endpoints the site uses is for ``agent.manage_endpoints`` holders to change."""
        fields = super().get_readonly_fields(request, obj)
        return fields if may_manage_endpoints(request) else [*fields, *SITE_ENDPOINT_FIELDS]

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        row = AgentSettings.current()
        return HttpResponseRedirect(reverse("admin:agent_agentsettings_change", args=[row.pk]))


@admin.register(UserSettings)
class UserSettingsAdmin(ManageAgentMixin, _UserSettingsBase):
    """A user's own instructions are theirs: never editable here, shown to content readers only."""

    list_display = [
        "user",
        "enabled",
        "language",
        "endpoint_in_effect",
        "tools_count",
        "daily_cost_cap",
        "daily_turns_cap",
    ]
    exclude = ["instructions", "speech_endpoint_set_by"]
    readonly_fields = [
        "endpoint_in_effect",
        "picture_endpoint_in_effect",
        "speech_endpoint_in_effect",
        "tools_count",
        "limits_now",
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """A personal endpoint is for ``agent.manage_endpoints`` holders to set."""
        instructions = "own_instructions" if may_read_content(request) else "own_instructions_hidden"
        endpoints = [] if may_manage_endpoints(request) else USER_ENDPOINT_FIELDS
        return [*endpoints, instructions, *super().get_readonly_fields(request, obj)]

    @admin.display(description=_("own instructions"))
    def own_instructions(self, obj: UserSettings) -> str:
        return obj.instructions or "—"

    @admin.display(description=_("own instructions"))
    def own_instructions_hidden(self, obj: UserSettings) -> str:
        return "—"

    @admin.display(description=_("endpoint in effect"))
    def endpoint_in_effect(self, obj: UserSettings) -> str:
        return choice_label(endpoint_rules.effective(obj.user, user_settings=obj))

    @admin.display(description=_("picture endpoint in effect"))
    def picture_endpoint_in_effect(self, obj: UserSettings) -> str:
        return choice_label(endpoint_rules.effective(obj.user, pictures=True, user_settings=obj))

    @admin.display(description=_("speech endpoint in effect"))
    def speech_endpoint_in_effect(self, obj: UserSettings) -> str:
        return choice_label(endpoint_rules.speech(obj.user, user_settings=obj))

    @admin.display(description=_("tools"))
    def tools_count(self, obj: UserSettings) -> int | str:
        """How many of the site's tools the user may use now, by their rights: what a turn of theirs sees."""
        return catalogue.count_for(obj.user) if obj.pk is not None else "—"

    @admin.display(description=_("limits now"))
    def limits_now(self, obj: UserSettings) -> str:
        """The user's standing against each cap, as the user is told it."""
        if obj.pk is None:
            return "—"
        lines = []
        for standing in caps.usage(obj.user).values():
            params = standing.params()
            text = caps.message(params) if standing.reached else None
            lines.append(text or _("%(limit)s: %(used)s of %(cap)s (0: no cap)") % params)
        return " · ".join(str(line) for line in lines)

    list_filter = ["enabled", "language"]
    search_fields = ["user__username", "user__email"]
    raw_id_fields = ["user"]

    def save_model(self, request: HttpRequest, obj: UserSettings, form: Any, change: bool) -> None:
        """An endpoint chosen here is staff's: it may be any endpoint, and the user cannot pick over it."""
        for field in USER_ENDPOINT_FIELDS:
            if field in form.changed_data or not change:
                chosen = getattr(obj, field) is not None
                setattr(obj, f"{field}_set_by", UserSettings.SetBy.STAFF if chosen else UserSettings.SetBy.NOBODY)
        super().save_model(request, obj, form, change)


def choice_label(choice: endpoint_rules.Choice) -> str:
    """An endpoint in effect, marked personal, inherited (the site's) or fallback with its reason."""
    name = str(choice.endpoint) if choice.endpoint is not None else "—"
    if choice.source == endpoint_rules.PERSONAL:
        return _("%(name)s (personal)") % {"name": name}
    if choice.source == endpoint_rules.FALLBACK:
        return _("%(name)s (fallback: %(reason)s)") % {"name": name, "reason": choice.reason}
    return _("%(name)s (inherited)") % {"name": name}
