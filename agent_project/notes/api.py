"""The demo's REST API of notes, which the assistant's tools are built from (``tools.py``).

A user sees and changes only their own notes: ``get_queryset`` scopes every action, and the
permission class lets a note's owner alone change it, as a real site's API would.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import filters, permissions, serializers, viewsets

from .models import Note


class NoteSerializer(serializers.ModelSerializer):
    title = serializers.CharField(label=_("Title"), max_length=200, help_text="A short name for the note.")
    body = serializers.CharField(label=_("Text"), allow_blank=True, required=False, help_text="The note's text.")

    class Meta:
        model = Note
        fields = ["id", "title", "body", "updated_at"]
        read_only_fields = ["updated_at"]


class OwnerOnly(permissions.BasePermission):
    """Only a note's owner may read or change it."""

    def has_object_permission(self, request: Any, view: Any, obj: Note) -> bool:
        return obj.owner_id == request.user.pk


class NoteViewSet(viewsets.ModelViewSet):
    """The signed-in user's notes."""

    queryset = Note.objects.all()
    serializer_class = NoteSerializer
    permission_classes = [permissions.DjangoModelPermissions, OwnerOnly]
    filter_backends = [filters.SearchFilter]
    search_fields = ["title", "body"]

    def get_queryset(self) -> Any:
        return Note.objects.filter(owner=self.request.user)

    def perform_create(self, serializer: Any) -> None:
        serializer.save(owner=self.request.user)
