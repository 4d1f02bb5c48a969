"""The assistant in a Telegram chat (``AGENT["TELEGRAM"]``): see ``docs/operations.md``, "Telegram".

``link_token`` is the page's door to connecting a chat; the rest runs in tasks and the reader.
Only ``agent.telegram.bot`` imports python-telegram-bot (``django-agent[telegram]``).
"""

from .links import link_token, link_url, live_links, revoke

__all__ = ["link_token", "link_url", "live_links", "revoke"]
