"""A user at ``MAX_STREAMS_PER_USER`` is told so on the page that opened one stream too many."""

from __future__ import annotations

import pytest
import redis
from django.conf import settings
from playwright.sync_api import expect

from tests.support.browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SITE_AGENT_SETTINGS = {"MAX_STREAMS_PER_USER": 1}


def test_the_tab_past_the_cap_says_why_it_has_no_connection(browser_context, tab, user):
    store = redis.Redis.from_url(settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"])
    store.delete(f"asgi:agent:streams:{user.pk}")
    # given one tab of the user holding the one stream allowed
    sign_in(tab, user)
    # when a second tab opens the page
    other = browser_context.new_page()
    other.goto(tab.url)
    # then it says, in words, why it is not connected, and the first tab is still connected
    expect(other.locator("#connection")).to_have_text(
        "The assistant is open in too many tabs. Close some of them, then reload this page."
    )
    expect(tab.locator("#connection")).to_be_hidden()
    store.close()
