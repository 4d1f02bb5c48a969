"""The ASGI wrapper a site puts around its HTTP app (the host's import path; the code is the web edge's)."""

from .web.body_limit import BodyLimitMiddleware

__all__ = ["BodyLimitMiddleware"]
