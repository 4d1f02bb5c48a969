"""A new turn's admission: the turn caps (the off-purpose block, the turns a day), then the cost
caps; and the off-purpose flags that the block counts. Checked once per turn, where the cost caps
are checked again before every model call."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from ..core.conf import agent_settings
from ..core.errors import Blocked, BudgetExceeded
from ..models import UNREAD, AgentSettings, OffPurposeFlag, Turn
from . import costs


def admit(user: Any, task: str, *, site: AgentSettings | None = None, user_settings: Any = UNREAD) -> str:
    """An admission id for a new turn, or ``BudgetExceeded`` / ``Blocked``. ``site`` and
    ``user_settings``: rows the caller already read, as ``costs.caps_for`` takes them."""
    since = timezone.now() - costs.WINDOW
    if OffPurposeFlag.objects.filter(user=user, created_at__gte=since).count() >= agent_settings.OFF_PURPOSE_LIMIT:
        raise Blocked()
    caps = costs.caps_for(user, site=site, user_settings=user_settings)
    if (
        caps["turns_per_user"]
        and Turn.objects.filter(user=user, created_at__gte=since).count() >= caps["turns_per_user"]
    ):
        raise BudgetExceeded(limit="turns_per_user")
    costs.check(user, caps)
    return uuid.uuid4().hex


def report_off_purpose(user: Any, turn_ref: Any, reason: str) -> bool:
    """Flag a turn as off purpose; one flag per turn. True when this call flagged it."""
    try:
        with transaction.atomic():
            OffPurposeFlag.objects.create(user=user, turn_ref=turn_ref, reason=(reason or "").strip()[:300])
    except IntegrityError:
        return False
    return True
