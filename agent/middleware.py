"""The middleware a site names in ``MIDDLEWARE`` (the host's import path; the code is the web edge's)."""

from .web.middleware import ContentSecurityPolicyMiddleware

__all__ = ["ContentSecurityPolicyMiddleware"]
