"""The one SQL statement a check reads: for each kind of actor, the user row with its credential's row
(a session, a Telegram link, a personal token or an OAuth access token), the user's settings, the site
switch and the permissions the assistant asks about, compiled once per thread (``agent.core.statements``).

Apart from the rules the row is judged by, as this is the part written against Django's ORM and the
tables of the apps it reads (sessions, auth's permissions and groups, django-oauth-toolkit's tokens).
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connections, router
from django.db.models import BigIntegerField, CharField, Exists, F, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce

from ..core.statements import Columns, Statement, compiled, slot
from .actors import MCP_PERMISSION, OAUTH_SCOPE, TELEGRAM_PERMISSION, USE_PERMISSION

SQL_SESSION, OTHER_SESSION, TELEGRAM, MCP = "sql_session", "other_session", "telegram", "mcp"
MCP_OAUTH = "mcp_oauth"
"""The kinds of actor whose checks read differently: a session in the site's SQL table (read in the
statement), a session in another engine (read through it), a Telegram link, an MCP token or an
OAuth access token (read in the statement; only the last reads django-oauth-toolkit's table)."""

MASK_BITS = 60  # permissions per bit mask, so each sum stays within a signed 64-bit integer

_SQL_SESSION_ENGINES = {"django.contrib.sessions.backends.db", "django.contrib.sessions.backends.cached_db"}
_MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def session_kind() -> str:
    """A session's kind of check: read in the statement where the site keeps its sessions in SQL."""
    return SQL_SESSION if settings.SESSION_ENGINE in _SQL_SESSION_ENGINES else OTHER_SESSION


def sessions_in_sql() -> bool:
    """Whether the site keeps its sessions in its SQL table, where one statement can read many at once."""
    return session_kind() == SQL_SESSION


NO_COLUMNS = Columns("agent.check", dict)
"""The caller of a plain check adds no columns of its own."""


def statement_for(kind: str, checked: tuple[str, ...], annotations: Columns | dict[str, Any] | None) -> Statement:
    """The statement for this kind of actor with the caller's ``annotations``: compiled once per
    thread for a ``Columns`` or none, else built for this call."""
    if annotations is None:
        annotations = NO_COLUMNS
    if isinstance(annotations, Columns):
        return _compiled(kind, checked, annotations)
    return Statement(_checks_queryset(kind, checked, annotations), annotations)


def _compiled(kind: str, checked: tuple[str, ...], columns: Columns) -> Statement:
    """The ladder's statement for this kind of actor and caller, compiled once per thread."""
    key = (router.db_for_read(get_user_model()), get_user_model()._meta.label, kind, checked, columns)

    def build() -> Statement:
        annotations = columns.build()
        return Statement(_checks_queryset(kind, checked, annotations), annotations)

    return compiled(key, build)


def _checks_queryset(kind: str, checked: tuple[str, ...], annotations: dict[str, Any]) -> QuerySet[Any]:
    """The user row with everything checks 1-3 read for this kind of actor, and the caller's annotations."""
    from ..models import AgentSettings, McpToken, TelegramLink

    user_model = get_user_model()
    owner: Any = slot("user", user_model._meta.pk)
    fields: dict[str, Any] = {"agent_site_enabled": Subquery(AgentSettings.objects.order_by().values("enabled")[:1])}
    if kind == SQL_SESSION:
        from django.contrib.sessions.models import Session  # only where the site keeps sessions in SQL

        live = Session.objects.filter(session_key=slot("session_key", CharField()), expire_date__gt=slot("now"))
        fields["agent_session_data"] = Subquery(live.values("session_data")[:1])
    elif kind == TELEGRAM:
        link = TelegramLink.objects.filter(
            pk=slot("link", TelegramLink._meta.pk), user_id=OuterRef("pk"), revoked_at__isnull=True
        )
        fields["agent_link_live"] = Exists(link.order_by())
    elif kind == MCP:  # the token names its user: the row is the live token's owner, or none
        token = McpToken.objects.order_by().filter(
            digest=slot("token", CharField()), revoked_at__isnull=True, expires_at__gt=slot("now")
        )
        owner = Subquery(token.values("user_id")[:1])
        fields["agent_token_id"] = Subquery(token.values("pk")[:1])
        fields["agent_token_name"] = Subquery(token.values("name")[:1])
    elif kind == MCP_OAUTH:  # the same, from django-oauth-toolkit's row (deleted when revoked)
        oauth = _oauth_access_tokens().filter(
            has_scope(OAUTH_SCOPE),
            token_checksum=slot("token", CharField()),
            expires__gt=slot("now"),
            user__isnull=False,
            application__isnull=False,
        )
        owner = Subquery(oauth.values("user_id")[:1])
        fields["agent_token_id"] = Subquery(oauth.values("pk")[:1])
        fields["agent_token_name"] = Subquery(oauth.values("application__name")[:1])
        fields["agent_application_id"] = Subquery(oauth.values("application_id")[:1])
    for number, permissions in enumerate(_chunks(checked)):
        fields[f"agent_held_{number}"] = _held_mask(user_model, permissions)
    if checked and _has_fields(user_model, "is_active", "is_superuser", "password"):
        fields.update(  # what ``Check.gate`` reads, under names no other column of the row has
            agent_gate_user=F("pk"),
            agent_gate_active=F("is_active"),
            agent_gate_superuser=F("is_superuser"),
            agent_gate_password=F("password"),
            agent_gate_assistant_on=Coalesce(F("agent_settings__enabled"), Value(True)),
        )
    fields.update(annotations)
    return user_model._default_manager.select_related("agent_settings").filter(pk=owner).annotate(**fields)


def _oauth_access_tokens() -> QuerySet[Any]:
    """django-oauth-toolkit's access tokens, through the app registry: nothing here imports it."""
    label = getattr(settings, "OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL", "oauth2_provider.AccessToken")
    tokens: QuerySet[Any] = apps.get_model(label)._default_manager.order_by()
    return tokens


def has_scope(scope: str, *, through: str = "") -> Q:
    """A space-separated ``scope`` column (of the row ``through`` leads to) that lists ``scope``."""
    column = f"{through}scope"
    return (
        Q(**{column: scope})
        | Q(**{f"{column}__startswith": f"{scope} "})
        | Q(**{f"{column}__endswith": f" {scope}"})
        | Q(**{f"{column}__contains": f" {scope} "})
    )


def _has_fields(model: Any, *names: str) -> bool:
    concrete = {field.name for field in model._meta.concrete_fields}
    return all(name in concrete for name in names)


def _model_backend_only() -> bool:
    return list(settings.AUTHENTICATION_BACKENDS) == [_MODEL_BACKEND] and hasattr(get_user_model(), "user_permissions")


_READ_WITH_SCOPE = {USE_PERMISSION, TELEGRAM_PERMISSION, MCP_PERMISSION}


def read_with_scope(permission: str) -> None:
    """Have every scope read ``permission`` in its one statement (the tool registry asks this for
    each tool's permission, so a turn's check covers the tools it may show)."""
    _READ_WITH_SCOPE.add(permission)


def checked_permissions() -> tuple[str, ...]:
    """The permissions the statement reads: every one asked of a scope where Django's ModelBackend
    alone grants them, none elsewhere (``Scope.has_perm`` then asks the site's backends)."""
    return tuple(sorted(_READ_WITH_SCOPE)) if _model_backend_only() else ()


def _chunks(checked: tuple[str, ...]) -> list[tuple[str, ...]]:
    return [checked[start : start + MASK_BITS] for start in range(0, len(checked), MASK_BITS)]


def held_permissions(user: Any, checked: tuple[str, ...]) -> frozenset[str]:
    """The checked permissions the user holds, from the statement's bit masks."""
    held: set[str] = set()
    for number, permissions in enumerate(_chunks(checked)):
        mask = int(getattr(user, f"agent_held_{number}") or 0)
        held.update(p for bit, p in enumerate(permissions) if mask >> bit & 1)
    return frozenset(held)


def _held_mask(user_model: Any, permissions: tuple[str, ...]) -> RawSQL:
    """Which of ``permissions`` the user holds directly or through a group, as ModelBackend reads
    them: one subquery whose sum has bit ``i`` set for ``permissions[i]``.

    One subquery instead of an EXISTS per permission: PostgreSQL plans it in a fraction of the time.
    """
    from django.contrib.auth.models import Group
    from django.contrib.contenttypes.models import ContentType

    quote = connections[router.db_for_read(user_model)].ops.quote_name
    own = user_model._meta.get_field("user_permissions")
    groups = user_model._meta.get_field("groups")
    group_rights = Group._meta.get_field("permissions")
    user_pk = f"{quote(user_model._meta.db_table)}.{quote(user_model._meta.pk.column)}"
    cases, params = [], []
    for bit, permission in enumerate(permissions):
        app_label, codename = permission.split(".", 1)
        cases.append(f"WHEN agent_ct.{quote('app_label')} = %s AND agent_p.{quote('codename')} = %s THEN {1 << bit}")
        params += [app_label, codename]
    codenames = sorted({p.split(".", 1)[1] for p in permissions})
    sql = (
        f"(SELECT CAST(COALESCE(SUM(DISTINCT CASE {' '.join(cases)} END), 0) AS BIGINT)"
        f" FROM {quote(Permission._meta.db_table)} agent_p"
        f" INNER JOIN {quote(ContentType._meta.db_table)} agent_ct"
        f" ON agent_ct.{quote('id')} = agent_p.{quote('content_type_id')}"
        f" WHERE agent_p.{quote('codename')} IN ({', '.join(['%s'] * len(codenames))})"
        f" AND (agent_p.{quote('id')} IN (SELECT agent_up.{quote(own.m2m_reverse_name())}"
        f" FROM {quote(own.m2m_db_table())} agent_up WHERE agent_up.{quote(own.m2m_column_name())} = {user_pk})"
        f" OR agent_p.{quote('id')} IN (SELECT agent_gp.{quote(group_rights.m2m_reverse_name())}"
        f" FROM {quote(group_rights.m2m_db_table())} agent_gp INNER JOIN {quote(groups.m2m_db_table())} agent_ug"
        f" ON agent_ug.{quote(groups.m2m_reverse_name())} = agent_gp.{quote(group_rights.m2m_column_name())}"
        f" WHERE agent_ug.{quote(groups.m2m_column_name())} = {user_pk})))"
    )
    return RawSQL(sql, [*params, *codenames], output_field=BigIntegerField())
