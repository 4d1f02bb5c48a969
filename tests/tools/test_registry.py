"""Declaring tools: ``@agent_tool`` validates at start-up and registers."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from agent.tools import agent_tool, execute_as, registry

QUERY = {"type": "object", "properties": {"query": {"type": "string"}}, "additionalProperties": False}


def noop(ctx: Any, **args: Any) -> dict[str, Any]:
    return {}


def preview(ctx: Any, **args: Any) -> dict[str, Any]:
    return {"action": "test"}


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "dotted.name", "ünicode", "slash/name", 42, None])
def test_a_bad_name_is_refused(declare, name):
    with pytest.raises(ImproperlyConfigured, match="name must match"):
        declare(noop, name=name)

    assert all(tool.name != name for tool in registry.all())


def test_a_64_character_name_with_dashes_and_underscores_is_accepted(declare):
    name = "a-b_C9" + "x" * 58

    declare(noop, name=name)

    assert registry.get(name) is not None


def test_an_unknown_kind_is_refused(declare):
    with pytest.raises(ImproperlyConfigured, match="kind"):
        declare(noop, name="t_kind", kind="delete")

    assert registry.get("t_kind") is None


@pytest.mark.parametrize("description", ["", "   \n", None])
def test_a_missing_description_is_refused(declare, description):
    with pytest.raises(ImproperlyConfigured, match="description"):
        declare(noop, name="t_description", description=description)

    assert registry.get("t_description") is None


@pytest.mark.parametrize(
    "parameters",
    [{"type": "string"}, {"properties": {"q": {"type": "string"}}}, [], "object", {"type": ["object", "null"]}],
)
def test_parameters_that_are_not_an_object_schema_are_refused(declare, parameters):
    with pytest.raises(ImproperlyConfigured, match="type 'object'"):
        declare(noop, name="t_params", parameters=parameters)

    assert registry.get("t_params") is None


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "object", "properties": {"q": {"type": "strnig"}}},
        {"type": "object", "required": "q"},
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": "one"}}},
    ],
)
def test_an_invalid_json_schema_is_refused(declare, parameters):
    with pytest.raises(ImproperlyConfigured, match="invalid parameters schema"):
        declare(noop, name="t_schema", parameters=parameters)

    assert registry.get("t_schema") is None


@pytest.mark.parametrize(
    "declaration",
    [
        {"preview": preview},
        {"module": "notes"},
        {"module": "", "preview": preview},
        {"module": "notes", "preview": {"action": "not callable"}},
    ],
    ids=["no-module", "no-preview", "blank-module", "preview-not-callable"],
)
def test_a_write_without_module_or_preview_is_refused(declare, declaration):
    with pytest.raises(ImproperlyConfigured, match="module and a preview"):
        declare(noop, name="t_write", kind="write", **declaration)

    assert registry.get("t_write") is None


def test_the_decorator_registers_the_tool_and_returns_the_function(declare):
    declared = declare(
        noop, name="t_search", description="  Search things.  ", parameters=QUERY, permission="notes.view_note"
    )

    tool = registry.get("t_search")
    assert declared is noop and noop.agent_tool is tool  # type: ignore[attr-defined]
    assert (tool.kind, tool.permission, tool.func) == ("read", "notes.view_note", noop)
    assert tool.definition() == {
        "type": "function",
        "function": {"name": "t_search", "description": "Search things.", "parameters": QUERY},
    }


@pytest.mark.django_db
def test_every_tools_definition_describes_a_big_enum_and_keeps_descriptions_short(declare, scope, chat):
    colours = [f"colour{n:03d}" for n in range(300)]
    declare(
        noop,
        name="t_paint",
        description="Paint a thing.\n\n    Written as a docstring, over lines.   " + "More words. " * 80,
        parameters={
            "type": "object",
            "properties": {
                "colour": {"enum": colours, "description": "The colour."},
                "size": {"enum": ["s", "m", "l"]},
            },
            "additionalProperties": False,
        },
    )
    tool = registry.get("t_paint")

    function = tool.definition()["function"]
    colour = function["parameters"]["properties"]["colour"]
    assert "enum" not in colour and colour["type"] == "string"
    assert colour["description"].startswith("The colour. One of 300 values, such as colour000, colour001")
    assert len(colour["description"]) <= 200
    assert function["parameters"]["properties"]["size"] == {"enum": ["s", "m", "l"]}  # a few are listed
    assert function["description"].startswith("Paint a thing. Written as a docstring, over lines. More words.")
    assert len(function["description"]) <= 400
    assert tool.parameters["properties"]["colour"]["enum"] == colours  # the whole list still validates

    refused = execute_as(scope, "t_paint", {"colour": "colour1234"}, via="agent", chat=chat, call_id="c1")
    assert refused.outcome == "invalid_arguments"
    assert "300 allowed values" in refused.result["details"][0] and "colour123" in refused.result["details"][0]
    assert len(refused.result["details"][0]) < 700


def test_a_tool_without_parameters_takes_an_empty_object(declare):
    declare(noop, name="t_bare")

    assert registry.get("t_bare").parameters == {"type": "object", "properties": {}, "additionalProperties": False}


def test_a_write_tool_keeps_its_module_preview_and_fingerprint(declare):
    def fingerprint(ctx: Any, **args: Any) -> str:
        return "digest"

    declare(noop, name="t_write", kind="write", module="notes", preview=preview, fingerprint=fingerprint)

    tool = registry.get("t_write")
    assert (tool.kind, tool.module, tool.preview, tool.fingerprint) == ("write", "notes", preview, fingerprint)


def test_unregister_removes_the_tool(declare):
    declare(noop, name="t_gone")

    registry.unregister("t_gone")

    assert registry.get("t_gone") is None
    assert "t_gone" not in [t.name for t in registry.all()]


def test_unregister_of_an_unknown_name_is_harmless():
    registry.unregister("t_never_declared")

    assert registry.get("t_never_declared") is None


def test_two_functions_under_one_name_are_refused(declare):
    declare(noop, name="t_twice")

    def other(ctx: Any) -> None:
        return None

    with pytest.raises(ImproperlyConfigured, match="Two agent tools"):
        agent_tool(name="t_twice", description="again")(other)

    assert registry.get("t_twice").func is noop


def test_a_tool_may_not_take_over_a_site_tool(declare):
    with pytest.raises(ImproperlyConfigured):
        declare(noop, name="notes_search")

    assert registry.get("notes_search").func is not noop


def test_the_sites_tools_are_discovered_on_ready():
    names = {t.name for t in registry.all()}

    assert {"notes_search", "notes_read", "notes_create", "notes_update"} <= names
    assert registry.get("notes_create").kind == "write" and registry.get("notes_create").module == "notes"
