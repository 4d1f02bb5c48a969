"""A query on the user row compiled once per thread and run many times, each run binding its own values.

The check ladder reads a session, a user, their settings and their rights in one statement before every
step of a turn; compiling that queryset each time would cost more than running it. A ``Columns`` names a
caller's own expressions on the user row, a ``slot`` marks a value that changes between runs, and a
``Statement`` runs the compiled SQL and builds the user as ``QuerySet`` would, reading every row afresh.

The rows are built through public means: ``Model.from_db`` for the user and for each object joined by
``select_related``, tied to the user by assigning the relation. What the statement reads of Django's SQL
compiler (the SQL, its parameters, where each model's columns are, the column converters) is read once,
when it is compiled, and checked there: a Django whose compiler describes its columns otherwise fails at
once with ``StatementError``, never with rows built wrong (``tests/test_statements.py`` runs on each
Django that CI tests).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable

import django
from django.db import connections
from django.db.models import DateTimeField, Expression, QuerySet


@dataclass(frozen=True)
class Columns:
    """A caller's own columns on the user row, compiled with the statement once per thread.

    ``build()`` gives the annotations (expressions on the user row). A value that changes from
    call to call must enter as ``slot(name, field)``, filled from the run's values;
    ``slot("now")`` is the time of the call.
    """

    name: str
    build: Callable[[], dict[str, Any]]


class Slot(Expression):
    """A parameter of a compiled statement, bound at each run from the caller's values."""

    def __init__(self, name: str, output_field: Any) -> None:
        super().__init__(output_field=output_field)
        self.name = name

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        return "%s", (self,)

    def bind(self, value: Any, connection: Any) -> Any:
        return self.output_field.get_db_prep_value(value, connection, prepared=False)


def slot(name: str, output_field: Any = None) -> Slot:
    """A value of the call in a ``Columns`` expression: ``slot("now")`` or one of the caller's values."""
    return Slot(name, output_field if output_field is not None else DateTimeField())


class StatementError(RuntimeError):
    """Django's SQL compiler no longer describes a query's columns the way ``Statement`` reads them."""


@dataclass(frozen=True)
class Part:
    """One model's columns in a statement's row: the user's, or those of an object joined to it."""

    model: Any
    span: slice
    attnames: list[str]
    pk_at: int  # the primary key's place within ``span``: None there means no joined row
    relation: str = ""  # how the user reaches a joined object (its attribute); "" for the user
    reverse: bool = False  # joined by a relation declared on the other model (``user.agent_settings``)

    def build(self, db: str, row: Any) -> Any:
        values = row[self.span]
        return None if values[self.pk_at] is None else self.model.from_db(db, self.attnames, values)


class Statement:
    """A user query compiled once: each ``run`` binds its slots, executes and builds the user as
    ``QuerySet`` would (with ``select_related`` and the annotations), reading everything afresh."""

    def __init__(self, queryset: QuerySet[Any], names: Iterable[str] = ()) -> None:
        self.db = queryset.db
        self.names = list(names)  # the caller's annotations, handed back by name
        compiler = queryset.query.get_compiler(using=self.db)
        sql, params = compiler.as_sql()
        self.sql, self.params, self.compiler = sql, list(params), compiler
        self.slots = [(position, p) for position, p in enumerate(self.params) if isinstance(p, Slot)]
        self.user, self.joined = _parts(compiler)
        self.model = self.user.model
        self.annotations = dict(compiler.annotation_col_map)
        self.converters = compiler.get_converters([column[0] for column in compiler.select[: compiler.col_count]])

    def run(self, values: dict[str, Any]) -> Any:
        with connections[self.db].cursor() as cursor:
            cursor.execute(self.sql, self.bind(values))
            return self.build(cursor.fetchone())

    def bind(self, values: dict[str, Any]) -> list[Any]:
        """The statement's parameters for one run (a caller that embeds ``sql`` in its own statement
        passes them along)."""
        connection = connections[self.db]
        params = list(self.params)
        for position, parameter in self.slots:
            params[position] = parameter.bind(values[parameter.name], connection)
        return params

    def build(self, row: Any) -> Any:
        """The user of one result row, with the annotations and each joined object; None for no row.

        A joined object that is there is assigned to its relation, so reading it costs no query;
        one that is not is left unread (``found`` tells, without a query)."""
        if row is None:
            return None
        if self.converters:
            row = next(self.compiler.apply_converters([row], self.converters))
        user = self.user.build(self.db, row)
        for part in self.joined:
            related = part.build(self.db, row)
            if related is not None:
                setattr(user, part.relation, related)
        for name, position in self.annotations.items():
            setattr(user, name, row[position])
        return user

    def found(self, row: Any, relation: str) -> bool:
        """Whether ``row`` holds an object for the joined ``relation`` (``select_related``'s name)."""
        (part,) = [part for part in self.joined if part.relation == relation]
        return row[part.span][part.pk_at] is not None


def _parts(compiler: Any) -> tuple[Part, list[Part]]:
    """Where the user's columns are in the compiled row, and those of each object joined to it."""
    try:
        info, select = compiler.klass_info, compiler.select
        user = _part(info, select)
        joined = []
        for related in info.get("related_klass_infos", []):
            if related.get("related_klass_infos"):
                raise StatementError("a statement joins one level of select_related, no deeper")
            field, reverse = related["field"], related["reverse"]
            relation = field.remote_field.get_accessor_name() if reverse else field.name
            joined.append(_part(related, select, relation=relation, reverse=reverse))
    except (AttributeError, KeyError, TypeError, IndexError) as shape:
        raise StatementError(
            f"Django {django.get_version()}'s SQL compiler describes a query's columns in a way this version "
            f"of django-agent does not read ({shape!r}); the app needs an update for this Django"
        ) from shape
    return user, joined


def _part(info: dict[str, Any], select: list[Any], **relation: Any) -> Part:
    start, end = info["select_fields"][0], info["select_fields"][-1] + 1
    model = info["model"]
    fields = [column[0].target for column in select[start:end]]
    if not all(issubclass(model, field.model) for field in fields):
        raise StatementError(f"the columns at {start}-{end} are not all {model._meta.label}'s")
    attnames = [field.attname for field in fields]
    return Part(model, slice(start, end), attnames, attnames.index(model._meta.pk.attname), **relation)


_threads = threading.local()


def compiled(key: Hashable, build: Callable[[], Statement]) -> Statement:
    """The statement stored under ``key`` for this thread, built on first use (a compiled query
    holds its thread's connection, so no two threads share one)."""
    statements: dict[Hashable, Statement] = _threads.__dict__.setdefault("statements", {})
    statement = statements.get(key)
    if statement is None:
        statement = statements[key] = build()
    return statement
