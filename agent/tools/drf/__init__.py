"""Tools from a site's Django REST Framework viewsets: the site's own views, run as the live user.

``register_viewset`` makes one tool per action. Every call dispatches the real view with a
request of the live session (``agent.tools.requests``) at the path the site's router gives the
action, so authentication, permission classes (object-level too), throttles, ``get_queryset``
scoping, filter backends, versioning and serializer validation all run as they do for the
user's own HTTP request; the view's refusal is the tool's. Reads answer with the response data;
writes become cards whose preview the serializer validated (in a transaction that is undone),
and run only at the user's Confirm, through the view again.

Registration needs no request: what depends on one (the serializer a user's request gets, the
permission classes' answer for this user) is asked when a user's turn needs it.

DRF is an optional extra (``django-agent[drf]``): only this package imports it.
"""

from .registration import register_viewset

__all__ = ["register_viewset"]
