"""The URLs a site includes (``path("...", include("agent.urls"))``): the pages and their JSON API."""

from django.urls import path

from .core.conf import agent_settings
from .mcp.tokens import oauth_on
from .telegram import webhook
from .web import event_stream, files, panel, views, voice

app_name = "agent"

urlpatterns = [
    path("", views.chat, name="chat"),
    path("c/<uuid:conversation_id>/", views.chat, name="chat_open"),
    path("jsi18n/", views.javascript_catalog, name="jsi18n"),
    path("language/", views.language, name="language"),
    path("api/events/", event_stream.stream, name="events"),
    path("api/conversations/", views.conversation_list, name="conversation_list"),
    path("api/conversations/new/", views.conversation_create, name="conversation_create"),
    path("api/conversations/<str:conversation_id>/", views.conversation_detail, name="conversation_detail"),
    path("api/conversations/<str:conversation_id>/rename/", views.conversation_rename, name="conversation_rename"),
    path("api/conversations/<str:conversation_id>/archive/", views.conversation_archive, name="conversation_archive"),
    path("api/conversations/<str:conversation_id>/restore/", views.conversation_restore, name="conversation_restore"),
    path("api/conversations/<str:conversation_id>/delete/", views.conversation_delete, name="conversation_delete"),
    path("api/conversations/<str:conversation_id>/messages/", views.message_list, name="message_list"),
    path("api/conversations/<str:conversation_id>/send/", views.turn_start, name="turn_start"),
    path("api/conversations/<str:conversation_id>/stop/", views.turn_stop, name="turn_stop"),
    path("api/conversations/<str:conversation_id>/edit/", views.turn_edit, name="turn_edit"),
    path("api/conversations/<str:conversation_id>/regenerate/", views.turn_regenerate, name="turn_regenerate"),
    path("api/conversations/<str:conversation_id>/switch/", views.version_switch, name="version_switch"),
    path("api/confirmations/<str:confirmation_id>/confirm/", views.confirmation_confirm, name="confirmation_confirm"),
    path("api/confirmations/<str:confirmation_id>/cancel/", views.confirmation_cancel, name="confirmation_cancel"),
    path("telegram/webhook/", webhook.receive, name="telegram_webhook"),
    path("assistant/", panel.page, name="assistant"),
    path("api/assistant/", panel.settings_api, name="assistant_api"),
    path("api/assistant/telegram/link/", panel.telegram_link, name="telegram_link"),
    path("api/assistant/telegram/revoke/", panel.telegram_revoke, name="telegram_revoke"),
    path("api/assistant/mcp/tokens/", panel.mcp_token, name="mcp_tokens"),
    path("api/assistant/mcp/revoke/", panel.mcp_revoke, name="mcp_revoke"),
    path("api/conversations/<str:conversation_id>/transcribe/", voice.transcribe, name="transcribe"),
    path("api/conversations/<str:conversation_id>/attachments/", files.composer, name="attachment_list"),
    path("api/conversations/<str:conversation_id>/attachments/upload/", files.upload, name="attachment_upload"),
    path("api/attachments/<str:attachment_id>/remove/", files.remove, name="attachment_remove"),
    path("api/attachments/<str:attachment_id>/file/", files.serve, name="attachment_file"),
]

if agent_settings.MCP is not None:  # the SDK is imported only by a site that serves MCP
    from .mcp.urls import urlpatterns as mcp_urlpatterns

    urlpatterns += mcp_urlpatterns
    if oauth_on():  # disconnecting an app the user connected with OAuth (django-oauth-toolkit's tokens)
        urlpatterns.append(path("api/assistant/mcp/disconnect/", panel.mcp_disconnect, name="mcp_disconnect"))
