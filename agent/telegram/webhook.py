"""Webhook mode: Telegram POSTs each update here; it is checked, recorded and answered at once.

The request must carry the site's secret in ``X-Telegram-Bot-Api-Secret-Token`` (given to Telegram
with ``setWebhook``); the work is a task, so Telegram hears back within a moment and never sends the
update again for a slow answer. An update that came before is answered 200 and not handled again.
"""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, HttpResponseNotFound
from django.utils.crypto import constant_time_compare
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from . import updates
from .bot import config

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


@csrf_exempt  # Telegram's POST carries no cookie: the secret header stands in for the CSRF token
@require_POST
def receive(request: HttpRequest) -> HttpResponse:
    settings = config()
    if settings is None or settings.mode != "webhook":
        return HttpResponseNotFound()
    if not constant_time_compare(request.headers.get(SECRET_HEADER, ""), settings.secret):
        return HttpResponseForbidden()
    try:
        update = json.loads(request.body)
    except (ValueError, RecursionError):
        return HttpResponse(status=400)
    if isinstance(update, dict):
        updates.record(update)
    return HttpResponse(status=200)
