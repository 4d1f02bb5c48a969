from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from rest_framework.routers import DefaultRouter, SimpleRouter

from agent.mcp.urls import well_known
from tests.babycare import api as babycare
from tests.notes.api import NoteViewSet

router = SimpleRouter()
router.register("notes", NoteViewSet, basename="note")

diary = DefaultRouter()  # a real site's router: namespaced, and the API version in the path
diary.register("children", babycare.ChildViewSet, basename="child")
diary.register("timers", babycare.TimerViewSet, basename="timer")
diary.register("feedings", babycare.FeedingViewSet, basename="feeding")
diary.register("weights", babycare.WeightViewSet, basename="weight")
diary.register("snippets", babycare.SnippetViewSet, basename="snippet")

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("admin/", admin.site.urls),
    path("assistant/", include("agent.urls")),
    path("", include(well_known)),  # the MCP endpoint's metadata where RFC 9728 clients look first
    path("api/", include(router.urls)),  # the test site's own REST API, which tools are built from
    re_path(r"^diary/(?P<version>v1|v2)/", include((diary.urls, "babycare"), namespace="babycare")),
]
