"""The test site: the agent app on the real PostgreSQL and Redis at 127.0.0.1, with a small notes app.

Standalone (it does not import the demo site's settings), so the tests see the
app as any host site would. Two suites can run side by side with their own
``DATABASE_URL``, ``REDIS_URL``, ``CELERY_BROKER_URL`` and ``AGENT_TEST_QUEUE``
(under pytest-xdist, each worker its own numbers from these: ``_own_worker_numbers``).
"""

import json
import os
from importlib.util import find_spec
from urllib.parse import urlsplit, urlunsplit

import environ

from agent.layers import redis_channel_layer
from agent.schedule import BEAT_SCHEDULE

env = environ.Env()


def _own_worker_numbers() -> None:
    """Under pytest-xdist, worker ``gwN`` takes Redis databases base + N and a queue and media folder of its own.

    The environment still names the bases, so a run of W workers owns the layer's databases base to
    base + W - 1 and the broker's likewise (the two never share a key). The derived values are written back
    to the environment, so the processes a test starts (daphne, workers) inherit them instead of deriving again.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or os.environ.get("AGENT_TEST_WORKER") == worker:
        return
    number = int(worker.removeprefix("gw"))
    for name, default in (("REDIS_URL", "redis://127.0.0.1:6379/5"), ("CELERY_BROKER_URL", "redis://127.0.0.1:6379/6")):
        url = urlsplit(env.str(name, default=default))
        os.environ[name] = urlunsplit(url._replace(path=f"/{int(url.path.lstrip('/') or 0) + number}"))
    os.environ["AGENT_TEST_QUEUE"] = f"{env.str('AGENT_TEST_QUEUE', default='agent-tests')}-{worker}"
    media_root = env.str("AGENT_TEST_MEDIA_ROOT", default="/tmp/agent-tests-media")
    os.environ["AGENT_TEST_MEDIA_ROOT"] = f"{media_root}-{worker}"
    os.environ["AGENT_TEST_WORKER"] = worker


_own_worker_numbers()

DEBUG = False
SECRET_KEY = "tests-only-secret"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

# MCP clients sign in with OAuth (AGENT["MCP"]["OAUTH"]) where django-oauth-toolkit is installed, as
# requirements-dev.txt installs it (the demo extra); a venv made before it came runs the rest without it.
OAUTH = find_spec("oauth2_provider") is not None
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    *(["oauth2_provider"] if OAUTH else []),
    "agent",
    "tests.notes",
    "tests.babycare",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "agent.middleware.ContentSecurityPolicyMiddleware",
]
ROOT_URLCONF = "tests.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [os.path.join(os.path.dirname(__file__), "templates")],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
            ],
        },
    },
]
ASGI_APPLICATION = "tests.asgi.application"

DATABASES = {"default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/agent")}
if env.bool("AGENT_TEST_PREPARED_STATEMENTS", default=False):  # every statement bound and prepared on the server
    DATABASES["default"].setdefault("OPTIONS", {}).update(server_side_binding=True, prepare_threshold=2)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
CHANNEL_LAYERS = {"default": redis_channel_layer(env.str("REDIS_URL", default="redis://127.0.0.1:6379/5"))}

test_queue = env.str("AGENT_TEST_QUEUE", default="agent-tests")  # this run's queue: AGENT["TASK_QUEUE"]
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/6")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = test_queue  # and anything else sent here stays on this run's queue too
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # as the README's: a worker holds no turn it cannot start
CELERY_BEAT_SCHEDULE = BEAT_SCHEDULE

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "agent:chat"
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("ru", "Русский"), ("et", "Eesti")]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
MEDIA_ROOT = env.str("AGENT_TEST_MEDIA_ROOT", default="/tmp/agent-tests-media")  # never the source tree

AGENT = {
    "SESSION_WRITE_MODULES": ["notes"],
    "MODEL_MAX_RETRIES": 0,
    "LOGOUT_URL": "logout",
    "TASK_QUEUE": test_queue,
    "MCP": {"OAUTH": OAUTH},
}
OAUTH2_PROVIDER = {"SCOPES": {"agent": "Use your assistant's tools", "read": "Read your data"}}
# A test that starts the site in a process of its own (daphne for the browser) gives it settings there
AGENT.update(json.loads(os.environ.get("AGENT_TEST_SETTINGS") or "{}"))
