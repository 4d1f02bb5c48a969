"""ASGI entry point: HTTP through Django, the assistant's websocket through Channels."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agent_project.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from agent.body_limit import BodyLimitMiddleware  # noqa: E402
from agent.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": BodyLimitMiddleware(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
gc.freeze()  # what loading made stays out of the collector's passes: no pause of every socket for them
