"""Tools from a site's Django forms: the form's own fields and ``clean()`` check the model's call.

``register_form`` makes one tool of a plain or a model form. Its parameters are the form's
fields (file fields left out: no JSON value uploads one); a call is valid when the bound form is
(its errors are the model's ``invalid_arguments`` and, on a card, the user's messages beside the
fields). A ModelForm starts from the object's values as the form itself shows them (a
many-to-many as its field represents it), so a field the call does not give is saved as it was.
A write is a card; at Confirm the form is bound and validated again, then saved, and the saved
object's key and name are what the model learns.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

from django import forms
from django.core.exceptions import ImproperlyConfigured, ObjectDoesNotExist, ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.functional import lazy
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..core.conf import agent_settings
from .registry import Refused, Tool, ToolContext, card_value, declared, object_name

ADD = gettext_lazy("Add %(thing)s")
CHANGE = gettext_lazy("Change %(thing)s")


def register_form(
    form_class: type[forms.BaseForm],
    *,
    name: str,
    kind: str = "write",
    module: str | None = None,
    permission: str | None = None,
    description: str,
    instance: Callable[..., Any] | None = None,
    save: Callable[[ToolContext, Any], Any] | None = None,
    extra_parameters: dict[str, Any] | None = None,
    form_kwargs: Callable[[ToolContext], dict[str, Any]] | None = None,
    title: Any = None,
    fingerprint_fields: list[str] | None = None,
) -> Tool:
    """A tool of ``form_class``.

    ``instance(ctx, **args)`` picks the object a ModelForm edits (arguments named in
    ``extra_parameters``, e.g. the note's id, reach it but not the form); ``save(ctx, form)``
    applies a valid form (default ``form.save()``), and for a read returns its answer.
    ``form_kwargs(ctx)`` gives the form what its ``__init__`` takes besides data (a user, a request).
    ``title`` defaults to "Add <thing>" or "Change <thing>" from a ModelForm's model;
    ``fingerprint_fields`` names the fields whose change since the card makes it stale (default: all).
    """
    if kind not in ("read", "write"):
        raise ImproperlyConfigured(f"agent tool {name!r}: kind must be 'read' or 'write'.")
    if save is None and not issubclass(form_class, forms.BaseModelForm):
        raise ImproperlyConfigured(f"agent tool {name!r}: a plain form needs save=, which applies it.")
    if kind == "write" and not module:
        raise ImproperlyConfigured(f"agent tool {name!r}: a write tool needs a module.")
    binder = _Binder(form_class, instance, extra_parameters or {}, form_kwargs, fingerprint_fields)

    def run(ctx: ToolContext, **args: Any) -> Any:
        form = binder.valid(ctx, args)
        answer = save(ctx, form) if save is not None else form.save()
        return answer if kind == "read" else _saved(answer)

    tool = Tool(
        name=name,
        kind="write" if kind == "write" else "read",
        description=description.strip(),
        func=run,
        parameters=binder.parameters(),
        permission=permission,
        module=module if kind == "write" else None,
        preview=binder.preview if kind == "write" else None,
        fingerprint=binder.fingerprint if kind == "write" and instance is not None else None,
        title=title or _title(form_class, edits=instance is not None),
        validate=binder.validate if kind == "read" else None,  # a write's preview validates
        tell_result=kind == "write",
    )
    return declared(tool)


def _saved(answer: Any) -> dict[str, Any]:
    """What the model learns of a confirmed write: the saved object's key and name."""
    if getattr(answer, "_meta", None) is None or getattr(answer, "pk", None) is None:
        return {"ok": True}
    return {"ok": True, "id": answer.pk, "object": object_name(answer)}


def _title(form_class: type[forms.BaseForm], *, edits: bool) -> Any:
    """ "Add feeding" or "Change feeding", from a ModelForm's model; None for a plain form."""
    model = getattr(getattr(form_class, "_meta", None), "model", None)
    if model is None:
        return None
    template = CHANGE if edits else ADD
    return lazy(lambda: str(template) % {"thing": model._meta.verbose_name}, str)()


class _Binder:
    """Binds the form to a call's arguments, as the site's own view would bind it to a POST."""

    def __init__(
        self,
        form_class: type[forms.BaseForm],
        instance: Callable[..., Any] | None,
        extra: dict[str, Any],
        form_kwargs: Callable[[ToolContext], dict[str, Any]] | None,
        fingerprint_fields: list[str] | None,
    ) -> None:
        self.form_class, self.instance, self.extra, self.form_kwargs = form_class, instance, extra, form_kwargs
        every: dict[str, forms.Field] = form_class.base_fields  # type: ignore[attr-defined]  # the metaclass sets it
        self.fields = {name: field for name, field in every.items() if not isinstance(field, forms.FileField)}
        self.fingerprint_fields = fingerprint_fields or list(self.fields)

    def parameters(self) -> dict[str, Any]:
        properties = {name: _schema(field) for name, field in self.fields.items()}
        required = [name for name, field in self.fields.items() if field.required and self.instance is None]
        properties.update(self.extra)
        required += list(self.extra)  # what picks the object is always needed
        schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        return schema

    def edited(self, ctx: ToolContext, args: dict[str, Any]) -> Any:
        """The object the form edits, as the site's ``instance()`` finds it for this user, or None for
        a form that edits none. None found is a refusal, as the site's own view answers 404: the
        same whether the object is not there or not the user's."""
        if self.instance is None:
            return None
        try:
            return self.instance(ctx, **args)
        except ObjectDoesNotExist:
            raise Refused("denied", {"error": "not_found", "message": _("Not found.")}) from None

    def _kwargs(self, ctx: ToolContext, obj: Any) -> dict[str, Any]:
        kwargs = dict(self.form_kwargs(ctx)) if self.form_kwargs is not None else {}
        if obj is not None:
            kwargs["instance"] = obj
        return kwargs

    def values(self, ctx: ToolContext, obj: Any) -> dict[str, Any]:
        """The object's values of the form's fields as the form itself shows them to a person (its
        fields' ``prepare_value``: tags as "birth, hospital", a many-to-many as its keys), which
        the same form reads back unchanged when it is bound to them."""
        if obj is None:
            return {}
        unbound = self.form_class(**self._kwargs(ctx, obj))
        return {name: unbound[name].value() for name in self.fields}

    def bound(self, ctx: ToolContext, args: dict[str, Any]) -> tuple[forms.BaseForm, Any, dict[str, Any]]:
        """The form bound to the arguments; a ModelForm's fields not given keep the object's values.
        (form, object or None, the object's values before the call)."""
        obj = self.edited(ctx, args)
        old = self.values(ctx, obj)
        data = {**old, **{name: value for name, value in args.items() if name in self.fields}}
        return self.form_class(data=data, **self._kwargs(ctx, obj)), obj, old

    def valid(self, ctx: ToolContext, args: dict[str, Any]) -> Any:
        form, _obj, _old = self.bound(ctx, args)
        _raise_unless_valid(form)
        return form

    def validate(self, ctx: ToolContext, **args: Any) -> None:
        self.valid(ctx, args)

    def preview(self, ctx: ToolContext, **args: Any) -> dict[str, Any]:
        """The fields the call sets, an edited object's old values beside them, each editable."""
        form, obj, old = self.bound(ctx, args)
        _raise_unless_valid(form)
        old = _plain(old)
        rows = []
        for name, field in self.fields.items():
            if name not in args:
                continue
            row: dict[str, Any] = {"name": name, "label": str(field.label or name.replace("_", " ").capitalize())}
            kind = _editable_type(field)
            row["value"] = args[name] if kind is not None else card_value(args[name])
            if obj is not None:
                row["old"] = card_value(old.get(name))
            row["editable"] = kind is not None
            if kind is not None:
                row["type"] = kind
            if kind == "choice":
                row["choices"] = [[key, str(text)] for key, text in _choices(field)]
            rows.append(row)
        return {"fields": rows}

    def fingerprint(self, ctx: ToolContext, **args: Any) -> str:
        """A digest of the edited object's current values of the form's fields, as the form shows them."""
        obj = self.edited(ctx, args)
        values = self.values(ctx, obj)
        state = {name: values.get(name) for name in self.fingerprint_fields} if obj is not None else None
        return hashlib.sha256(json.dumps(state, sort_keys=True, cls=DjangoJSONEncoder).encode()).hexdigest()


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """Values as JSON keeps them (a date as ISO text), for a card's preview."""
    plain: dict[str, Any] = json.loads(json.dumps(values, cls=DjangoJSONEncoder))
    return plain


def _raise_unless_valid(form: forms.BaseForm) -> None:
    """The form's errors as the tool's: each field's messages, ``__all__`` for ``clean()``'s own."""
    if not form.is_valid():
        raise ValidationError({name: list(errors) for name, errors in form.errors.items()})


def _schema(field: forms.Field) -> dict[str, Any]:
    """A form field as JSON Schema: its type, limits and choices, its help text as the description."""
    schema: dict[str, Any]
    if isinstance(field, forms.BooleanField):
        schema = {"type": "boolean"}
    elif isinstance(field, forms.ModelChoiceField) and not isinstance(field, forms.ModelMultipleChoiceField):
        schema = {"type": ["integer", "string"]}
    elif isinstance(field, forms.MultipleChoiceField):
        schema = {"type": "array", "items": {"enum": [key for key, _label in _choices(field)]}}
    elif isinstance(field, forms.ChoiceField):
        schema = {"enum": [key for key, _label in _choices(field)]}
    elif isinstance(field, (forms.FloatField, forms.DecimalField)):  # before IntegerField, their base
        schema = {"type": "number", **_bounds(field)}
    elif isinstance(field, forms.IntegerField):
        schema = {"type": "integer", **_bounds(field)}
    elif isinstance(field, forms.DateTimeField):
        schema = {"type": "string", "format": "date-time"}
    elif isinstance(field, forms.DateField):
        schema = {"type": "string", "format": "date"}
    elif isinstance(field, forms.CharField):
        schema = {"type": "string"}
        if field.max_length is not None:
            schema["maxLength"] = field.max_length
        if field.min_length is not None:
            schema["minLength"] = field.min_length
        if isinstance(field, forms.EmailField):
            schema["format"] = "email"
    else:
        schema = {}
    if field.help_text:
        schema["description"] = str(field.help_text)
    return schema


def _choices(field: Any) -> list[tuple[Any, Any]]:
    """A choice field's (value, label) pairs, its blank choice left out."""
    return [(key, label) for key, label in field.choices if key != ""]


def _bounds(field: Any) -> dict[str, Any]:
    bounds = {}
    if field.min_value is not None:
        bounds["minimum"] = float(field.min_value)  # a DecimalField's Decimal is no JSON number
    if field.max_value is not None:
        bounds["maximum"] = float(field.max_value)
    return bounds


def _editable_type(field: forms.Field) -> str | None:
    """The widget a card gives a form field, or None for one the user edits elsewhere. A choice
    among more than ``TOOL_ENUM_MAX`` is typed (the form judges it), not listed on the card."""
    if isinstance(field, forms.BooleanField):
        return "boolean"
    if isinstance(field, forms.ModelChoiceField):
        return None
    if isinstance(field, forms.ChoiceField) and not isinstance(field, forms.MultipleChoiceField):
        return "choice" if len(_choices(field)) <= agent_settings.TOOL_ENUM_MAX else "text"
    if isinstance(field, (forms.FloatField, forms.DecimalField)):  # before IntegerField, their base
        return "number"
    if isinstance(field, forms.IntegerField):
        return "integer"
    if isinstance(field, forms.DateTimeField):
        return "datetime"
    if isinstance(field, forms.DateField):
        return "date"
    if isinstance(field, forms.CharField):
        return "textarea" if isinstance(field.widget, forms.Textarea) else "text"
    return None
