"""One policy on the assistant's pages, the assistant's own, beside Django 6's ``SECURE_CSP``.

On Django 5.2 the app's middleware alone sets it (``tests/web/test_page.py``); these
run on the Django 6 leg of CI, where a site may turn on Django's own middleware.
"""

from __future__ import annotations

from typing import Any

import django
import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.urls import reverse

from agent.web.http import POLICY

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(django.VERSION < (6, 0), reason="Django's own Content-Security-Policy came with Django 6.0"),
]

DJANGO = "django.middleware.csp.ContentSecurityPolicyMiddleware"
OURS = "agent.middleware.ContentSecurityPolicyMiddleware"
SITE = {"default-src": ["'self'"], "script-src": ["'self'", "https://cdn.example.com"], "connect-src": ["'self'"]}
SITE_REPORTING = {"default-src": ["'self'"], "report-uri": ["/csp-reports/"]}


def site_with(*middleware: str) -> Any:
    """The test site with Django's CSP on, and the two middlewares in the order given (or one of them alone)."""
    rest = [name for name in settings.MIDDLEWARE if name not in (DJANGO, OURS)]
    return override_settings(MIDDLEWARE=[*rest, *middleware], SECURE_CSP=SITE, SECURE_CSP_REPORT_ONLY=SITE_REPORTING)


@pytest.mark.parametrize(
    "middleware", [(OURS, DJANGO), (DJANGO, OURS), (DJANGO,)], ids=["ours-first", "django-first", "django-alone"]
)
@pytest.mark.parametrize("page", ["agent:chat", "agent:assistant"])
def test_the_assistants_pages_get_the_assistants_policy_alone(session: tuple[Client, Any], middleware, page) -> None:
    client, _ref = session
    # given a site that turns on Django's own policy, with or without the app's middleware
    with site_with(*middleware):
        # when a user opens one of the assistant's pages
        response = client.get(reverse(page))
    # then the page has the assistant's strict policy, and nothing of the site's beside it
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == POLICY
    assert "Content-Security-Policy-Report-Only" not in response


@pytest.mark.parametrize("middleware", [(OURS, DJANGO), (DJANGO, OURS)], ids=["ours-first", "django-first"])
def test_the_sites_other_pages_keep_the_sites_policy(session: tuple[Client, Any], middleware) -> None:
    client, _ref = session
    with site_with(*middleware):
        response = client.get(reverse("admin:login"))
    assert (
        response["Content-Security-Policy"]
        == "default-src 'self'; script-src 'self' https://cdn.example.com; connect-src 'self'"
    )
    assert response["Content-Security-Policy-Report-Only"] == "default-src 'self'; report-uri /csp-reports/"


def test_the_policy_django_builds_from_the_assistants_directives_is_the_assistants() -> None:
    from django.utils.csp import build_policy

    from agent.web.http import POLICY_DIRECTIVES

    assert build_policy(POLICY_DIRECTIVES) == POLICY
