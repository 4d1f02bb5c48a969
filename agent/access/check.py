"""Who may act: a live credential (an actor), checked afresh on every call.

An actor is a browser session (``SessionRef``), a linked Telegram chat
(``TelegramRef``) or an MCP client's personal access token (``McpRef``).
``authorize_session`` turns any of them into a ``Scope`` (what it may do now)
or raises a ``Refusal``. What "live" means for each kind is
said here and nowhere else:

- a session: its row exists and has not expired, it is the user's, its
  password hash is still the user's (a password change ends it), it is not an
  operator's (impersonation); a logout deletes it.
- a Telegram link: its row is not revoked (the user revokes it on "My
  assistant" or with /stop in Telegram, staff in the admin), and the user holds
  ``agent.use_telegram`` too.
- an MCP token: its row is not revoked and not expired, and the user holds
  ``agent.use_mcp`` too. Impersonation never applies: a token is the user's own.
  An OAuth access token (django-oauth-toolkit's, where the site signs MCP
  clients in with OAuth) is the same but for its row: it exists (revoking
  deletes it), has not expired, carries the scope ``agent`` and names a user
  and the client it was issued to.

For every kind, the user must be active, hold ``agent.use_agent`` and have the
assistant on. Nothing here caches across calls, so a revocation, a
deactivation or a lost permission takes effect on the very next call: a
running turn checks its actor before every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import import_module
from typing import Any, Callable

from django.apps import apps
from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Permission
from django.db import connections, router
from django.db.models import BigIntegerField, CharField, Exists, F, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from django.utils.module_loading import import_string

from .. import errors
from ..conf import agent_settings
from ..events import session_group
from ..statements import Columns, Statement, compiled, slot

USE_PERMISSION = "agent.use_agent"
TELEGRAM_PERMISSION = "agent.use_telegram"
MCP_PERMISSION = "agent.use_mcp"
OAUTH_SCOPE = "agent"
"""The OAuth scope an access token must carry to call the assistant's tools."""


@dataclass(frozen=True)
class SessionRef:
    """A live Django session and the user it was read for. The key is a credential."""

    session_key: str = field(repr=False)
    user_id: int | None  # None: nobody signed in, refused by every check

    def __repr__(self) -> str:
        return f"SessionRef(user_id={self.user_id!r})"

    @classmethod
    def from_request(cls, request: Any) -> "SessionRef":
        return cls(session_key=request.session.session_key or "", user_id=request.user.pk)

    @classmethod
    def from_scope(cls, scope: dict[str, Any]) -> "SessionRef":
        session = scope.get("session")
        user = scope.get("user")
        return cls(
            session_key=(session.session_key if session is not None else None) or "",
            user_id=getattr(user, "pk", None),
        )

    @property
    def group(self) -> str:
        """The Channels group of this session's sockets (a hash, never the key)."""
        return session_group(self.session_key)


@dataclass(frozen=True)
class TelegramRef:
    """A linked Telegram chat (``TelegramLink``) and the user it was linked to: a credential too."""

    link_id: int
    user_id: int | None

    def __repr__(self) -> str:
        return f"TelegramRef(link_id={self.link_id!r}, user_id={self.user_id!r})"


@dataclass(frozen=True)
class McpRef:
    """An MCP client's bearer token by its secret's SHA-256 digest: a credential. A personal access
    token (``McpToken``), or with ``oauth`` an OAuth access token (django-oauth-toolkit's, whose
    ``token_checksum`` is the same digest).

    Made from the bearer secret alone (``user_id`` None); the scope a check builds carries the one
    with the token's user, id and name (an OAuth token's: its client's) filled in from the same statement.
    """

    digest: str = field(repr=False)
    user_id: int | None = None
    token_id: int | None = None
    token_name: str = ""
    oauth: bool = False
    application_id: int | None = None  # an OAuth token's client

    def __repr__(self) -> str:
        return f"McpRef(token_id={self.token_id!r}, user_id={self.user_id!r}, oauth={self.oauth!r})"

    @property
    def grant(self) -> str:
        """What a client's calls belong to: its personal token, or its OAuth client for this user
        (whose access tokens change at every refresh)."""
        return f"oauth:{self.application_id}" if self.oauth else f"token:{self.token_id}"


Actor = SessionRef | TelegramRef | McpRef
"""The live credential a call is made for."""


def actor_fields(ref: Actor) -> dict[str, Any]:
    """The columns of a ``Turn`` that name its actor, so its runner checks the same one at every step."""
    if isinstance(ref, TelegramRef):
        return {"session_key": "", "telegram_link_id": ref.link_id}
    if isinstance(ref, McpRef):
        raise TypeError("an MCP token runs no turns: its calls are answered within their request")
    return {"session_key": ref.session_key, "telegram_link_id": None}


def actor_of(turn: Any) -> Actor:
    """The actor a turn runs for, from its row (an ended turn's is gone: every check refuses it)."""
    if turn.telegram_link_id is not None:
        return TelegramRef(link_id=turn.telegram_link_id, user_id=turn.user_id)
    return SessionRef(session_key=turn.session_key, user_id=turn.user_id)


@dataclass(frozen=True)
class Scope:
    """What a live actor may do now. Built per call, never cached."""

    ref: Actor
    user: Any
    language: str
    user_settings: Any = None
    checked: frozenset[str] = frozenset()
    permissions: frozenset[str] | None = None  # of ``checked``, those held, read with the scope

    @property
    def user_id(self) -> Any:
        """The user's primary key, of whatever type the site's user model gives it."""
        return self.user.pk

    def has_perm(self, permission: str) -> bool:
        if self.permissions is not None and permission in self.checked:
            return permission in self.permissions
        return bool(self.user.has_perm(permission))


_DEFAULT_DETECTOR = "agent.access.hijack_detector"


def hijack_detector(request_or_scope: Any) -> bool:
    """Default detector: django-hijack keeps ``hijack_history`` in the session."""
    session = _session_of(request_or_scope)
    return bool(session is not None and session.get("hijack_history"))


def is_impersonated(request_or_scope: Any) -> bool:
    """Whether this request or Channels scope belongs to an impersonating operator."""
    detector: Callable[[Any], bool] = import_string(agent_settings.IMPERSONATION_DETECTOR)
    return bool(detector(request_or_scope))


def _session_impersonated(data: dict[str, Any]) -> bool:
    """Whether the session, as stored now, is an operator's: a session marked after a socket
    opened or a turn began is refused from its next check on.

    The detector gets a scope-like dict whose ``session`` is the stored data.
    """
    return is_impersonated({"type": "session", "session": data})


def _session_of(request_or_scope: Any) -> Any:
    if isinstance(request_or_scope, dict):
        return request_or_scope.get("session")
    return getattr(request_or_scope, "session", None)


def load_session(session_key: str) -> dict[str, Any]:
    """The session's data through the site's session engine; ``{}`` when gone."""
    if not session_key:
        return {}
    engine = import_module(settings.SESSION_ENGINE)
    store = engine.SessionStore(session_key=session_key)
    return dict(store.load())


def authorize_session(ref: Actor, *, impersonated: bool) -> Scope:
    """Impersonation, the live actor and the rights: the session (or link) may use the assistant now."""
    return authorize_with(ref, impersonated=impersonated)[0]


def authorize_with(
    ref: Actor,
    *,
    impersonated: bool,
    annotations: Columns | dict[str, Any] | None = None,
    values: dict[str, Any] | None = None,
) -> tuple[Scope, dict[str, Any]]:
    """Checks 1-3, read in one SQL statement, with the caller's own ``annotations`` on the user row.

    One statement reads the session row, the user with their settings, the site switch and the
    permissions the assistant asks about (``agent.use_agent`` and every tool's, in one subquery),
    so a turn can re-check before each step at the cost of one round trip. Its SQL is compiled
    once per thread and kind of caller (``Columns``); each call binds its own values (``slot``)
    and reads every row afresh. A site whose sessions or permissions live elsewhere (another
    session engine, another auth backend) gets the same checks through its engine and
    ``has_perm``, at the cost of more queries.
    """
    check = prepare_check(ref, impersonated=impersonated, annotations=annotations, values=values)
    with connections[check.statement.db].cursor() as cursor:
        cursor.execute(check.sql, check.params)
        return check.judge(cursor.fetchone())


@dataclass
class Check:
    """The ladder's statement for one actor, ready to run alone or inside a caller's own statement
    (``sql`` and ``params``), and the judgement of the row it reads (``judge``)."""

    ref: Actor
    kind: str
    checked: tuple[str, ...]
    statement: Statement
    params: list[Any]

    @property
    def sql(self) -> str:
        return str(self.statement.sql)

    def judge(self, row: Any, accepted: "Accepted | None" = None) -> tuple[Scope, dict[str, Any]]:
        """The scope the row allows, or the refusal it calls for. With ``accepted``, a session's
        data and password hash equal to those of a check that passed are not decoded again (the
        verdict on them cannot differ); ``accepted`` then learns the ones this row passes with."""
        from ..models import AgentSettings

        ref = self.ref
        user = self.statement.build(row)
        if isinstance(ref, TelegramRef):
            if user is None or not user.agent_link_live:
                raise errors.SessionGone()  # the link was revoked, or its user is gone
            _check_user(user, {})
        elif isinstance(ref, McpRef):
            if user is None:
                raise errors.SessionGone()  # no live token with this secret
            ref = replace(
                ref,
                user_id=user.pk,
                token_id=user.agent_token_id,
                token_name=user.agent_token_name or "",
                application_id=getattr(user, "agent_application_id", None),
            )
            _check_user(user, {})
        elif accepted is not None and user is not None and accepted.covers(user):
            pass  # the same session data and password a check of this turn has passed on
        else:
            _check_session(ref, user, self.kind)
            if accepted is not None:
                accepted.learn(user)
        site_enabled = user.agent_site_enabled
        if site_enabled is None:
            site_enabled = AgentSettings.current().enabled
        checked = self.checked
        permissions = None
        if checked:
            permissions = frozenset(checked) if (user.is_active and user.is_superuser) else _held(user, checked)
        user_settings = user.agent_settings if self.statement.found(row, "agent_settings") else None
        scope = Scope(
            ref=ref,
            user=user,
            language=language_for(user_settings),
            user_settings=user_settings,
            checked=frozenset(checked),
            permissions=permissions,
        )
        if not site_enabled or not scope.has_perm(USE_PERMISSION):
            raise errors.Forbidden()
        if isinstance(ref, TelegramRef) and not scope.has_perm(TELEGRAM_PERMISSION):
            raise errors.Forbidden()
        if isinstance(ref, McpRef) and not scope.has_perm(MCP_PERMISSION):
            raise errors.Forbidden()
        if user_settings is not None and user_settings.enabled is False:
            raise errors.Forbidden()
        return scope, {name: getattr(user, name) for name in self.statement.names}

    def gate(self, accepted: "Accepted") -> tuple[str, list[Any]] | None:
        """An SQL condition on the statement's columns (named ``agent_check``) that holds only when
        ``judge`` would pass the row without a Python step: the actor is live on the very session
        data and password hash ``accepted`` holds, the user active, the site and their assistant
        on, ``agent.use_agent`` (and ``agent.use_telegram`` for a link) held. None where a check
        needs Python every time (another session engine or auth backend, the site's own checks,
        a session hash or impersonation detector of its own), or before ``accepted`` knows a
        session's data. False never lets a refused row through;
        it may refuse a live one (a session saved since), which ``judge`` then passes."""
        gated = "agent_gate_active" in self.statement.annotations
        if (
            not gated
            or not self.checked
            or agent_settings.SCOPE_CHECKS
            or self.kind in (_OTHER_SESSION, _MCP, _MCP_OAUTH)
        ):
            return None
        conditions = [
            "agent_check.agent_gate_active",
            "agent_check.agent_site_enabled",
            "agent_check.agent_gate_assistant_on",
        ]
        params: list[Any] = []
        needed: tuple[str, ...]
        if self.kind == _TELEGRAM:
            conditions.append("agent_check.agent_link_live")
            needed = (USE_PERMISSION, TELEGRAM_PERMISSION)
        else:
            if accepted.session_data is None:
                return None
            conditions += ["agent_check.agent_session_data = %s", "agent_check.agent_gate_password = %s"]
            params += [accepted.session_data, accepted.password]
            needed = (USE_PERMISSION,)
        for permission in needed:
            number, bit = divmod(self.checked.index(permission), _MASK_BITS)
            conditions.append(
                f"(agent_check.agent_gate_superuser OR agent_check.agent_held_{number} & {1 << bit} <> 0)"
            )
        return " AND ".join(conditions), params


@dataclass
class Accepted:
    """A session's stored data and its user's password hash as a check of one turn passed them."""

    session_data: str | None = None
    password: str | None = None

    def covers(self, user: Any) -> bool:
        data = getattr(user, "agent_session_data", None)
        return (
            self.session_data is not None
            and data == self.session_data
            and user.password == self.password
            and bool(user.is_active)
        )

    def learn(self, user: Any) -> None:
        """Keep what a check passed on, where the verdict depends on nothing else: Django's own
        session hash (of the password alone), the default impersonation detector (of the stored
        data alone) and no site checks of its own."""
        data = getattr(user, "agent_session_data", None)
        if data is not None and _verdict_from_data_and_password(user):
            self.session_data, self.password = data, user.password


def _verdict_from_data_and_password(user: Any) -> bool:
    own_hash = getattr(type(user), "get_session_auth_hash", None) is AbstractBaseUser.get_session_auth_hash
    default_detector = agent_settings.IMPERSONATION_DETECTOR == _DEFAULT_DETECTOR
    return own_hash and default_detector and not agent_settings.SCOPE_CHECKS


def prepare_check(
    ref: Actor,
    *,
    impersonated: bool,
    annotations: Columns | dict[str, Any] | None = None,
    values: dict[str, Any] | None = None,
) -> Check:
    """The ladder's statement for ``ref`` with the caller's ``annotations``, its values bound;
    refuses at once what needs no reading (an impersonating request, no one signed in)."""
    if impersonated:
        raise errors.Impersonated()
    if isinstance(ref, TelegramRef):
        kind = _TELEGRAM
        if ref.user_id is None:
            raise errors.SessionGone()
    elif isinstance(ref, McpRef):
        kind = _MCP_OAUTH if ref.oauth else _MCP
        if not ref.digest:
            raise errors.SessionGone()
    elif isinstance(ref, SessionRef) and ref.user_id is not None and ref.session_key:
        kind = _SQL_SESSION if settings.SESSION_ENGINE in _SQL_SESSION_ENGINES else _OTHER_SESSION
    else:
        raise errors.SessionGone()
    checked = tuple(_checked_permissions()) if _model_backend_only() else ()
    if isinstance(annotations, Columns):
        statement = _compiled(kind, checked, annotations)
    else:
        statement = Statement(_checks_queryset(kind, checked, annotations or {}), annotations or {})
    credential: dict[str, Any]
    if isinstance(ref, TelegramRef):
        credential = {"link": ref.link_id}
    elif isinstance(ref, McpRef):
        credential = {"token": ref.digest}
    else:
        credential = {"session_key": ref.session_key}
    params = statement.bind({**(values or {}), "user": ref.user_id, "now": timezone.now(), **credential})
    return Check(ref, kind, checked, statement, params)


def _check_session(ref: SessionRef, user: Any, kind: str) -> None:
    """The session row is there, unexpired, this user's, not an operator's, and still matches the user."""
    if user is None:
        _session_user(load_session(ref.session_key), ref)  # a gone or foreign session says so first
        raise errors.SessionGone()
    if kind == _SQL_SESSION:
        raw = user.agent_session_data
        data = _decode_session(raw) if raw else {}
    else:
        data = load_session(ref.session_key)
    _session_user(data, ref)
    if _session_impersonated(data):
        raise errors.Impersonated()
    if not _hash_matches(user, data.get(HASH_SESSION_KEY, "")):
        raise errors.SessionGone()  # the password changed since the session began
    _check_user(user, data)


_SQL_SESSION, _OTHER_SESSION, _TELEGRAM, _MCP = "sql_session", "other_session", "telegram", "mcp"
_MCP_OAUTH = "mcp_oauth"
"""The kinds of actor whose checks read differently: a session in the site's SQL table (read in the
statement), a session in another engine (read through it), a Telegram link, an MCP token or an
OAuth access token (read in the statement; only the last reads django-oauth-toolkit's table)."""


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
    if kind == _SQL_SESSION:
        from django.contrib.sessions.models import Session  # only where the site keeps sessions in SQL

        live = Session.objects.filter(session_key=slot("session_key", CharField()), expire_date__gt=slot("now"))
        fields["agent_session_data"] = Subquery(live.values("session_data")[:1])
    elif kind == _TELEGRAM:
        link = TelegramLink.objects.filter(
            pk=slot("link", TelegramLink._meta.pk), user_id=OuterRef("pk"), revoked_at__isnull=True
        )
        fields["agent_link_live"] = Exists(link.order_by())
    elif kind == _MCP:  # the token names its user: the row is the live token's owner, or none
        token = McpToken.objects.order_by().filter(
            digest=slot("token", CharField()), revoked_at__isnull=True, expires_at__gt=slot("now")
        )
        owner = Subquery(token.values("user_id")[:1])
        fields["agent_token_id"] = Subquery(token.values("pk")[:1])
        fields["agent_token_name"] = Subquery(token.values("name")[:1])
    elif kind == _MCP_OAUTH:  # the same, from django-oauth-toolkit's row (deleted when revoked)
        oauth = _oauth_access_tokens().filter(
            _has_scope(OAUTH_SCOPE),
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


def _has_scope(scope: str) -> Q:
    """A space-separated ``scope`` column that lists ``scope``."""
    return (
        Q(scope=scope)
        | Q(scope__startswith=f"{scope} ")
        | Q(scope__endswith=f" {scope}")
        | Q(scope__contains=f" {scope} ")
    )


_SQL_SESSION_ENGINES = {"django.contrib.sessions.backends.db", "django.contrib.sessions.backends.cached_db"}
_MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
_MASK_BITS = 60  # permissions per bit mask, so each sum stays within a signed 64-bit integer


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


def _checked_permissions() -> list[str]:
    return sorted(_READ_WITH_SCOPE)


def _chunks(checked: tuple[str, ...]) -> list[tuple[str, ...]]:
    return [checked[start : start + _MASK_BITS] for start in range(0, len(checked), _MASK_BITS)]


def _held(user: Any, checked: tuple[str, ...]) -> frozenset[str]:
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


def _decode_session(raw: str) -> dict[str, Any]:
    engine = import_module(settings.SESSION_ENGINE)
    return dict(engine.SessionStore().decode(raw))


def _session_user(data: dict[str, Any], ref: SessionRef) -> None:
    """The session exists and is this user's."""
    session_user = data.get(SESSION_KEY)
    if session_user is None:
        raise errors.SessionGone()
    if str(session_user) != str(ref.user_id):
        raise errors.Mismatch()


def _check_user(user: Any, data: dict[str, Any]) -> None:
    """The user is active and passes the site's own checks (``data``: the session's, empty for a link)."""
    if not user.is_active:
        raise errors.Inactive()
    for path in agent_settings.SCOPE_CHECKS:
        code = import_string(path)(user, data)
        if code:
            raise errors.ScopeRefused(code)


def _hash_matches(user: Any, session_hash: str) -> bool:
    if not hasattr(user, "get_session_auth_hash"):
        return True
    if constant_time_compare(session_hash, user.get_session_auth_hash()):
        return True
    return any(constant_time_compare(session_hash, h) for h in user.get_session_auth_fallback_hash())


def language_for(user_settings: Any, fallback: str | None = None) -> str:
    """The user's language: their own setting, else the request's, else the site's."""
    if user_settings is not None and user_settings.language:
        return str(user_settings.language)
    return fallback or settings.LANGUAGE_CODE
