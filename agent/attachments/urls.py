"""The files' URL patterns, included by ``agent.urls`` (so their names are ``agent:attachment_*``)."""

from django.urls import path

from . import views

urlpatterns = [
    path("api/conversations/<str:conversation_id>/attachments/", views.composer, name="attachment_list"),
    path("api/conversations/<str:conversation_id>/attachments/upload/", views.upload, name="attachment_upload"),
    path("api/attachments/<str:attachment_id>/remove/", views.remove, name="attachment_remove"),
    path("api/attachments/<str:attachment_id>/file/", views.serve, name="attachment_file"),
]
