"""The test site's REST API of notes: each rule a real site's viewset would hold refuses something.

- ``get_queryset``: a user sees their own notes and the notes titled "[shared] ..." of others;
- object permission: only a note's owner changes or deletes it (a shared note reads, 403 to change);
- model permissions (``DjangoModelPermissions``): adding, changing, deleting need ``notes.*_note``;
- throttles: three new notes per user and hour, five notes read one by one;
- filters: django-filter's, besides search and ordering;
- the serializer: a title may not be all capitals, and is at most 200 characters;
- an ``@action`` of its own settings: pinning a note is for staff alone, with a serializer of its own.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django_filters import rest_framework as django_filters
from rest_framework import filters, pagination, permissions, serializers, throttling, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from .models import Note


class NoteSerializer(serializers.ModelSerializer):
    owner = serializers.ReadOnlyField(source="owner.username")

    class Meta:
        model = Note
        fields = ["id", "title", "body", "owner"]
        extra_kwargs = {"title": {"help_text": "A short name for the note."}}

    def validate_title(self, value: str) -> str:
        if value.isupper():
            raise serializers.ValidationError("A title may not be all capitals.")
        return value


class PinSerializer(serializers.Serializer):
    place = serializers.IntegerField(min_value=1, max_value=9, help_text="Where among the pinned notes it goes.")


class OwnerChanges(permissions.BasePermission):
    """Anyone who sees a note reads it; only its owner changes it."""

    def has_object_permission(self, request: Any, view: Any, obj: Note) -> bool:
        return request.method in permissions.SAFE_METHODS or obj.owner_id == request.user.pk


class NewNotes(throttling.UserRateThrottle):
    """Three new notes per user and hour; other actions are not counted."""

    rate = "3/hour"
    scope = "new_notes"

    def allow_request(self, request: Any, view: Any) -> bool:
        return view.action != "create" or super().allow_request(request, view)


class NotesRead(throttling.UserRateThrottle):
    """Five notes read one by one per user and hour; lists are not counted."""

    rate = "5/hour"
    scope = "notes_read"

    def allow_request(self, request: Any, view: Any) -> bool:
        return view.action != "retrieve" or super().allow_request(request, view)


class NoteFilter(django_filters.FilterSet):
    title = django_filters.CharFilter(lookup_expr="icontains", label="Words in the title")
    archived = django_filters.BooleanFilter(method="filter_archived", label="Archived notes only, or none")
    body = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Note
        fields: list[str] = []  # the declared filters alone

    def filter_archived(self, queryset: Any, name: str, value: bool) -> Any:
        archived = Q(title__startswith="[archived]")
        return queryset.filter(archived) if value else queryset.exclude(archived)


class SmallPages(pagination.PageNumberPagination):
    page_size = 2


class NoteViewSet(viewsets.ModelViewSet):
    """The signed-in user's notes, and the notes others share."""

    queryset = Note.objects.all()
    serializer_class = NoteSerializer
    permission_classes = [permissions.DjangoModelPermissions, OwnerChanges]
    throttle_classes = [NewNotes, NotesRead]
    filter_backends = [django_filters.DjangoFilterBackend, filters.SearchFilter, filters.OrderingFilter]
    filterset_class = NoteFilter
    search_fields = ["title", "body"]
    ordering_fields = ["title", "id"]
    pagination_class = SmallPages

    def get_queryset(self) -> Any:
        return Note.objects.filter(Q(owner=self.request.user) | Q(title__startswith="[shared]")).order_by("id")

    def perform_create(self, serializer: Any) -> None:
        serializer.save(owner=self.request.user)

    @action(detail=True, methods=["post"])
    def archive(self, request: Any, pk: Any = None) -> Response:
        """Mark a note archived: its title gets "[archived]" in front."""
        note = self.get_object()
        note.title = f"[archived] {note.title}"
        note.save(update_fields=["title"])
        return Response({"id": note.pk, "title": note.title})

    @action(detail=True, methods=["post"], permission_classes=[permissions.IsAdminUser], serializer_class=PinSerializer)
    def pin(self, request: Any, pk: Any = None) -> Response:
        """Pin a note among the first nine: its title gets its place in front. For staff only."""
        note = self.get_object()
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        note.title = f"[{serializer.validated_data['place']}] {note.title}"
        note.save(update_fields=["title"])
        return Response({"id": note.pk, "title": note.title})
