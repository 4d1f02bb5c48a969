"""Upload, list, remove and serve the user's files over HTTP; each view calls the files API.

Files are served only to their owner, through the check ladder, never from a
public media URL: with ``Content-Disposition``, ``nosniff`` and a policy that
lets nothing in the response run. They stream from the storage in chunks, with
``Range`` support (``downloads``).
"""

from __future__ import annotations

from functools import wraps
from typing import Any, Callable

from django.core.exceptions import ValidationError
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import translation
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_POST

from .. import errors
from ..access import SessionRef, is_impersonated, language_for
from ..ai import limits
from ..conf import agent_settings
from ..conversations import file_view
from ..models import UserSettings
from . import api, downloads

MULTIPART_OVERHEAD = 64 * 1024
"""Room for the multipart headers around the file in a request's declared length."""

SERVED_POLICY = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"
"""A served file runs nothing, even opened on its own."""

STATUS_FOR_CODE = {"file_too_large": 413, "unsupported_type": 415, "too_many_files": 409}


def json_api(view: Callable[..., Any]) -> Callable[..., HttpResponse]:
    """The session ref and impersonation for the view; refusals and invalid input as JSON with their codes."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return JsonResponse({"error": "session_gone"}, status=401)
        ref = SessionRef.from_request(request)
        own = UserSettings.objects.filter(user_id=request.user.pk).first()
        with translation.override(language_for(own, get_language())):
            try:
                return view(request, ref, is_impersonated(request), *args, **kwargs)
            except errors.Refusal as refusal:
                explained = limits.client_fields(refusal)  # a quota's standing and message
                return JsonResponse({"error": refusal.code, **explained}, status=refusal.http_status)
            except ValidationError as invalid:
                return invalid_response(invalid)

    return wrapper


def invalid_response(invalid: ValidationError) -> JsonResponse:
    code = getattr(invalid, "code", None) or "invalid"
    fields = invalid.message_dict if hasattr(invalid, "error_dict") else {"__all__": invalid.messages}
    return JsonResponse({"error": code, "fields": fields}, status=STATUS_FOR_CODE.get(code, 400))


class _SizeCap(FileUploadHandler):
    """Stops reading an upload as soon as it passes ``MAX_FILE_BYTES``, whatever the request declared."""

    def __init__(self, request: HttpRequest, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.too_large = False

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > self.limit:
            self.too_large = True
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


@csrf_exempt  # the upload handlers must be set before the CSRF check reads the body; _upload checks it
@require_POST
def upload(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """Add a file to the chat's composer: 201 with what a client sees of it."""
    limit = agent_settings.MAX_FILE_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit + MULTIPART_OVERHEAD:  # refused before the body is read
        return _too_large(request, limit)
    cap = _SizeCap(request, limit)
    request.upload_handlers.insert(0, cap)
    return _upload(request, conversation_id, cap)


@csrf_protect
@json_api
def _upload(request: HttpRequest, ref: SessionRef, impersonated: bool, conversation_id: str, cap: _SizeCap) -> Any:
    uploaded = request.FILES.get("file")
    if cap.too_large:
        raise api.too_large(cap.limit)
    if uploaded is None:
        raise ValidationError({"file": ValidationError(_("No file was sent."), code="required")})
    try:
        attachment = api.add_attachment(ref, conversation_id, uploaded, impersonated=impersonated)
    finally:
        uploaded.close()
    return JsonResponse({"attachment": file_view(attachment)}, status=201)


def _too_large(request: HttpRequest, limit: int) -> HttpResponse:
    own = UserSettings.objects.filter(user_id=request.user.pk).first() if request.user.is_authenticated else None
    with translation.override(language_for(own, get_language())):
        return invalid_response(api.too_large(limit))


@require_GET
@json_api
def composer(request: HttpRequest, ref: SessionRef, impersonated: bool, conversation_id: str) -> HttpResponse:
    """The chat's files waiting for a message, oldest first."""
    rows = api.list_unlinked(ref, conversation_id, impersonated=impersonated)
    return JsonResponse({"attachments": [file_view(row) for row in rows]})


@require_POST
@json_api
def remove(request: HttpRequest, ref: SessionRef, impersonated: bool, attachment_id: str) -> HttpResponse:
    api.remove_attachment(ref, attachment_id, impersonated=impersonated)
    return JsonResponse({"removed": attachment_id})


@require_GET
@json_api
def serve(request: HttpRequest, ref: SessionRef, impersonated: bool, attachment_id: str) -> HttpResponse:
    """The owner's ready file: a picture inline (re-encoded when it was read), anything else as a download.

    A ``Range`` request gets its bytes (206) or 416; a stored file that cannot be read is 404.
    """
    attachment, handle = api.open_file(ref, attachment_id, impersonated=impersonated)
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
