"""The baby diary's own forms, as a site's views use them."""

from __future__ import annotations

from typing import Any

from django import forms

from .models import Feeding, Tag, Weight


class TagsField(forms.CharField):
    """Tags typed as "birth, hospital", the way django-taggit's form field takes and shows them.

    Cleaning makes the tags that are not there yet, as taggit does when the form is saved."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return ", ".join(sorted(tag.name if isinstance(tag, Tag) else str(tag) for tag in value))
        return value

    def clean(self, value: Any) -> list[Tag]:
        names = [name.strip() for name in (super().clean(value) or "").split(",") if name.strip()]
        return [Tag.objects.get_or_create(name=name)[0] for name in names]


class WeightForm(forms.ModelForm):
    tags = TagsField(required=False, help_text="Tags, separated by commas.")

    class Meta:
        model = Weight
        fields = ["child", "weight", "date", "notes", "tags"]


class WeightNotesForm(forms.ModelForm):
    """The tags as Django's own many-to-many field shows them: a multiple choice of their keys."""

    class Meta:
        model = Weight
        fields = ["notes", "tags"]


class FeedingForm(forms.ModelForm):
    class Meta:
        model = Feeding
        fields = ["child", "start", "end", "method", "amount"]
