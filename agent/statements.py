"""A query on the user row compiled once per thread and run many times, each run binding its own values.

The check ladder reads a session, a user, their settings and their rights in one statement before every
step of a turn; compiling that queryset each time would cost more than running it. A ``Columns`` names a
caller's own expressions on the user row, a ``slot`` marks a value that changes between runs, and a
``Statement`` runs the compiled SQL and builds the user as ``QuerySet`` would, reading every row afresh.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable

from django.db import connections
from django.db.models import DateTimeField, Expression, QuerySet
from django.db.models.query import get_related_populators  # type: ignore[attr-defined]  # not in the stubs


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

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        return "%s", [self]

    def bind(self, value: Any, connection: Any) -> Any:
        return self.output_field.get_db_prep_value(value, connection, prepared=False)


def slot(name: str, output_field: Any = None) -> Slot:
    """A value of the call in a ``Columns`` expression: ``slot("now")`` or one of the caller's values."""
    return Slot(name, output_field if output_field is not None else DateTimeField())


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
        klass_info, select = compiler.klass_info, compiler.select
        self.model = klass_info["model"]
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        self.span = slice(start, end)
        self.init_list = [column[0].target.attname for column in select[start:end]]
        self.populators = get_related_populators(klass_info, select, self.db)
        self.annotations = dict(compiler.annotation_col_map)
        self.converters = compiler.get_converters([column[0] for column in select[: compiler.col_count]])

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
        """The user of one result row, with the annotations; None for no row."""
        if row is None:
            return None
        if self.converters:
            row = next(self.compiler.apply_converters([row], self.converters))
        user = self.model.from_db(self.db, self.init_list, row[self.span])
        for populator in self.populators:
            populator.populate(row, user)
        for name, position in self.annotations.items():
            setattr(user, name, row[position])
        return user


_threads = threading.local()


def compiled(key: Hashable, build: Callable[[], Statement]) -> Statement:
    """The statement stored under ``key`` for this thread, built on first use (a compiled query
    holds its thread's connection, so no two threads share one)."""
    statements: dict[Hashable, Statement] = _threads.__dict__.setdefault("statements", {})
    statement = statements.get(key)
    if statement is None:
        statement = statements[key] = build()
    return statement
