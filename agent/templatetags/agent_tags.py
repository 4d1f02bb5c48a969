"""Template tags for a host site's own pages, such as its login page."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.translation import get_language

from ..web.views import offered_languages

register = template.Library()


@register.inclusion_tag("agent/language_picker.html", takes_context=True)
def agent_language_form(context: template.Context) -> dict[str, Any]:
    """The language picker, posting to ``agent:language``; nothing when the site offers one language."""
    request = getattr(context, "request", None)
    languages = offered_languages()
    return {
        "languages": languages if len(languages) > 1 else [],
        "current_language": get_language(),
        "next": request.get_full_path() if request is not None else "",
        "csrf_token": context.get("csrf_token"),
    }
