"""Who may see and change what on the staff pages: ``agent.manage_agent`` for every page,
``agent.manage_endpoints`` to change where chats go, ``agent.view_chat_content`` to read users' words."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.admin import ModelAdmin
from django.contrib.admin.filters import FieldListFilter, ListFilter
from django.contrib.admin.utils import get_fields_from_path
from django.contrib.auth import get_user_model
from django.db.models import Model
from django.http import HttpRequest

MANAGE = "agent.manage_agent"
MANAGE_ENDPOINTS = "agent.manage_endpoints"
VIEW_CONTENT = "agent.view_chat_content"
SITE_ENDPOINT_FIELDS = ["default_endpoint", "picture_endpoint", "speech_endpoint", "selectable_endpoints"]
USER_ENDPOINT_FIELDS = ["endpoint", "picture_endpoint", "speech_endpoint"]


if TYPE_CHECKING:  # a mixin of model admins: typed as one, a plain class at run time
    _AdminMixin = ModelAdmin[Any]
else:
    _AdminMixin = object


class DeclaredLookupsOnly(_AdminMixin):
    """A list page filters only as its own filters and date links do; any other lookup in the
    query string is refused (400), so no field can be probed through the row count.

    Django's own check guards relations only: ``?session_key__regex=^a`` would be run.
    """

    def lookup_allowed(self, lookup: str, value: Any, request: Any = None) -> bool:
        return lookup in self.declared_lookups(request)

    def declared_lookups(self, request: Any) -> set[str]:
        """The query-string keys of this page's ``list_filter`` and ``date_hierarchy``."""
        allowed: set[str] = set()
        for entry in self.get_list_filter(request):
            allowed.update(self._filter_parameters(request, entry))
        hierarchy = self.date_hierarchy
        if hierarchy:
            allowed.update(f"{hierarchy}__{part}" for part in ("year", "month", "day"))
        return allowed

    def _filter_parameters(self, request: Any, entry: Any) -> list[str]:
        model = self.model
        if isinstance(entry, type) and issubclass(entry, ListFilter) and not issubclass(entry, FieldListFilter):
            return [p for p in entry(request, {}, model, self).expected_parameters() if p]
        field_path, filter_class = entry if isinstance(entry, (tuple, list)) else (entry, FieldListFilter.create)
        field = get_fields_from_path(model, field_path)[-1]
        spec = filter_class(field, request, {}, model, self, field_path=field_path)
        return [p for p in spec.expected_parameters() if p]


def owner_fields(model: type[Model]) -> list[str]:
    """The fields that say whose a row is: its relations to the user model."""
    users = get_user_model()
    return [
        field.name
        for field in model._meta.get_fields()
        if field.concrete and field.is_relation and not field.many_to_many and field.related_model is users
    ]


class ManageAgentMixin(DeclaredLookupsOnly):
    """Every page here is for ``agent.manage_agent`` holders, and no page moves a row to another user."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """A row's owner is read-only once the row exists, for every staff member, superusers too:
        settings, chats, cards, files and links stay with the user they were made for."""
        fields = list(super().get_readonly_fields(request, obj))
        if obj is None:
            return fields
        return [*fields, *(name for name in owner_fields(self.model) if name not in fields)]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(MANAGE)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(MANAGE)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(MANAGE)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return request.user.has_perm(MANAGE)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(MANAGE)


class ReadOnlyMixin(ManageAgentMixin):
    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def may_manage_endpoints(request: HttpRequest) -> bool:
    return request.user.has_perm(MANAGE) and request.user.has_perm(MANAGE_ENDPOINTS)


def may_read_content(request: HttpRequest) -> bool:
    return request.user.has_perm(VIEW_CONTENT)
