"""Upload, list, remove and serve the user's files over HTTP; each view calls the files API.

Files are served only to their owner, through the check ladder, never from a
public media URL: with ``Content-Disposition``, ``nosniff`` and a policy that
lets nothing in the response run. They stream from the storage in chunks, with
``Range`` support (``downloads``).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.utils import translation
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from ..access import SessionRef
from ..attachments import api as files
from ..attachments import downloads
from ..conversations import file_view
from ..core.conf import agent_settings
from .http import SizeCap, api, invalid_response, page_language

SERVED_POLICY = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"
"""A served file runs nothing, even opened on its own."""


@csrf_exempt  # the upload handlers must be set before the CSRF check reads the body; _upload checks it
@require_POST
def upload(request: HttpRequest, conversation_id: str) -> HttpResponseBase:
    """Add a file to the chat's composer: 201 with what a client sees of it."""
    limit = agent_settings.MAX_FILE_BYTES
    cap = SizeCap.install(request, limit)
    if cap is None:  # refused before the body is read
        with translation.override(page_language(request)):
            return invalid_response(files.too_large(limit))
    return _upload(request, conversation_id, cap)


@api  # checks the CSRF token after the upload handlers are in place
def _upload(request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str, cap: SizeCap) -> Any:
    uploaded = request.FILES.get("file")
    if cap.too_large:
        raise files.too_large(cap.limit)
    if uploaded is None:
        raise ValidationError({"file": ValidationError(_("No file was sent."), code="required")})
    try:
        attachment = files.add_attachment(actor, conversation_id, uploaded, impersonated=impersonated)
    finally:
        uploaded.close()
    return JsonResponse({"attachment": file_view(attachment)}, status=201)


@require_GET
@api
def composer(request: HttpRequest, actor: SessionRef, impersonated: bool, conversation_id: str) -> HttpResponse:
    """The chat's files waiting for a message, oldest first."""
    rows = files.list_unlinked(actor, conversation_id, impersonated=impersonated)
    return JsonResponse({"attachments": [file_view(row) for row in rows]})


@require_POST
@api
def remove(request: HttpRequest, actor: SessionRef, impersonated: bool, attachment_id: str) -> HttpResponse:
    files.remove_attachment(actor, attachment_id, impersonated=impersonated)
    return JsonResponse({"removed": attachment_id})


@require_GET
@api
def serve(request: HttpRequest, actor: SessionRef, impersonated: bool, attachment_id: str) -> HttpResponseBase:
    """The owner's ready file: a picture inline (re-encoded when it was read), anything else as a download.

    A ``Range`` request gets its bytes (206) or 416; a stored file that cannot be read is 404.
    """
    attachment, handle = files.open_file(actor, attachment_id, impersonated=impersonated)
    content_type = attachment.content_type
    if content_type.startswith("text/") or content_type == "application/json":
        content_type += "; charset=utf-8"
    response = downloads.respond(
        attachment,
        handle,
        request.headers,
        content_type=content_type,
        as_attachment=not attachment.is_picture,
        filename=attachment.name,
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = SERVED_POLICY
    response["Cache-Control"] = "private, no-store"
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    return response
