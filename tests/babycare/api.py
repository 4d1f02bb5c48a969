"""The baby diary's REST API, in the shapes real DRF apps have (a namespaced router in
``tests/urls.py`` with URL-path versioning routes it):

- children by slug, ``LimitOffsetPagination``, a FilterSet whose filters have ``help_text``, ordering,
  and an ``@action`` whose ``url_path`` takes a year;
- a ``DjangoModelPermissions`` that also asks the view permission to read: a user without the
  app's permissions is refused everything;
- timers with a read-only ``duration`` that changes every second, and a PATCH ``@action`` with no
  serializer of its own;
- feedings whose serializer stops (deletes) the running timer it is given, in ``validate()``, and
  whose ``get_serializer_class`` reads ``self.request`` (staff see the amount);
- weights with tags (a many-to-many field) and a date;
- DRF's own tutorial's snippets: a language among 600, an HTML-only ``highlight`` action,
  hyperlinked fields, and the developer's docstring on the viewset.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from django_filters import rest_framework as django_filters
from rest_framework import filters, pagination, permissions, renderers, serializers, versioning, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from .models import Child, Feeding, Snippet, Tag, Timer, Weight


class DiaryPermissions(permissions.DjangoModelPermissions):
    """The model's permissions, reading included (as babybuddy's own API asks)."""

    perms_map = {**permissions.DjangoModelPermissions.perms_map, "GET": ["%(app_label)s.view_%(model_name)s"]}


class DiaryVersions(versioning.URLPathVersioning):
    default_version = "v1"
    allowed_versions = ["v1", "v2"]


class Versioned:
    versioning_class = DiaryVersions
    permission_classes = [DiaryPermissions]


class ChildFilter(django_filters.FilterSet):
    first_name = django_filters.CharFilter(lookup_expr="icontains", help_text="Part of the child's first name.")
    born_after = django_filters.DateFilter(field_name="birth_date", lookup_expr="gte", help_text="Born on or after.")

    class Meta:
        model = Child
        fields: list[str] = []


class ChildSerializer(serializers.ModelSerializer):
    class Meta:
        model = Child
        fields = ["id", "first_name", "slug", "birth_date"]


class ChildViewSet(Versioned, viewsets.ModelViewSet):
    queryset = Child.objects.all()
    serializer_class = ChildSerializer
    lookup_field = "slug"
    pagination_class = pagination.LimitOffsetPagination
    filter_backends = [django_filters.DjangoFilterBackend, filters.OrderingFilter]
    filterset_class = ChildFilter
    ordering_fields = ["first_name", "birth_date"]

    @action(detail=False, url_path=r"born/(?P<year>[0-9]{4})")
    def born(self, request: Any, year: str, version: Any = None) -> Response:
        """The children born in a year."""
        children = self.filter_queryset(self.get_queryset()).filter(birth_date__year=int(year))
        return Response(self.get_serializer(children, many=True).data)


class TimerSerializer(serializers.ModelSerializer):
    child = serializers.SlugRelatedField(slug_field="slug", queryset=Child.objects.all())
    user = serializers.ReadOnlyField(source="user.username")
    duration = serializers.SerializerMethodField()

    class Meta:
        model = Timer
        fields = ["id", "child", "name", "start", "duration", "user"]

    def get_duration(self, timer: Timer) -> str:
        return str(timezone.now() - timer.start)

    def validate_name(self, value: str) -> str:
        """A site's bug: a name starting with "!" breaks its check (the card must say so, not a 500)."""
        if value.startswith("!"):
            raise KeyError(value)
        return value


class TimerViewSet(Versioned, viewsets.ModelViewSet):
    queryset = Timer.objects.all()
    serializer_class = TimerSerializer

    def get_queryset(self) -> Any:
        return Timer.objects.filter(user=self.request.user)

    def perform_create(self, serializer: Any) -> None:
        serializer.save(user=self.request.user)

    @action(detail=True, methods=["patch"])
    def restart(self, request: Any, pk: Any = None, version: Any = None) -> Response:
        """Start a timer again from now."""
        timer = self.get_object()
        timer.start = timezone.now()
        timer.save(update_fields=["start"])
        return Response(self.get_serializer(timer).data)


class FeedingSerializer(serializers.ModelSerializer):
    child = serializers.SlugRelatedField(slug_field="slug", queryset=Child.objects.all(), required=False)
    timer = serializers.PrimaryKeyRelatedField(queryset=Timer.objects.all(), required=False, write_only=True)

    class Meta:
        model = Feeding
        fields = ["id", "child", "start", "end", "method", "timer"]
        extra_kwargs = {"start": {"required": False}, "end": {"required": False}}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A running timer gives the feeding its child and times, and is stopped (deleted), as
        babybuddy's serializers do."""
        timer = attrs.pop("timer", None)
        if timer is not None:
            attrs.update(child=timer.child, start=timer.start, end=timezone.now())
            timer.delete()
        if self.instance is None and not all(attrs.get(name) for name in ("child", "start", "end")):
            raise serializers.ValidationError("Give a timer, or the child, start and end.")
        return attrs


class StaffFeedingSerializer(FeedingSerializer):
    class Meta(FeedingSerializer.Meta):
        fields = [*FeedingSerializer.Meta.fields, "amount"]


class FeedingViewSet(Versioned, viewsets.ModelViewSet):
    queryset = Feeding.objects.all()

    def get_serializer_class(self) -> Any:
        return StaffFeedingSerializer if self.request.user.is_staff else FeedingSerializer


class WeightSerializer(serializers.ModelSerializer):
    child = serializers.SlugRelatedField(slug_field="slug", queryset=Child.objects.all())
    tags = serializers.SlugRelatedField(slug_field="name", queryset=Tag.objects.all(), many=True, required=False)

    class Meta:
        model = Weight
        fields = ["id", "child", "weight", "date", "notes", "tags"]


class WeightViewSet(Versioned, viewsets.ModelViewSet):
    queryset = Weight.objects.all()
    serializer_class = WeightSerializer


class SnippetSerializer(serializers.HyperlinkedModelSerializer):
    owner = serializers.ReadOnlyField(source="owner.username")
    highlight = serializers.HyperlinkedIdentityField(view_name="babycare:snippet-highlight", format="html")
    url = serializers.HyperlinkedIdentityField(view_name="babycare:snippet-detail")

    class Meta:
        model = Snippet
        fields = ["url", "id", "highlight", "owner", "title", "code", "language", "style", "picture"]


class SnippetViewSet(Versioned, viewsets.ModelViewSet):
    """
    This ViewSet automatically provides `list`, `create`, `retrieve`,
    `update` and `destroy` actions.

    Additionally we also provide an extra `highlight` action.
    """

    queryset = Snippet.objects.all()
    serializer_class = SnippetSerializer

    @action(detail=True, renderer_classes=[renderers.StaticHTMLRenderer])
    def highlight(self, request: Any, *args: Any, **kwargs: Any) -> Response:
        snippet = self.get_object()
        return Response(f"<pre>{snippet.code}</pre>")

    def perform_create(self, serializer: Any) -> None:
        serializer.save(owner=self.request.user)
