"""The test site: the agent app on the real PostgreSQL and Redis at 127.0.0.1, with a small notes app.

Standalone (it does not import the demo site's settings), so the tests see the
app as any host site would. Two suites can run side by side with their own
``DATABASE_URL``, ``REDIS_URL``, ``CELERY_BROKER_URL`` and ``AGENT_TEST_QUEUE``.
"""

import os

import environ

from agent.layers import redis_channel_layer

env = environ.Env()

DEBUG = False
SECRET_KEY = "tests-only-secret"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "agent",
    "tests.notes",
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
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
CHANNEL_LAYERS = {"default": redis_channel_layer(env.str("REDIS_URL", default="redis://127.0.0.1:6379/5"))}

test_queue = env.str("AGENT_TEST_QUEUE", default="agent-tests")  # this run's queue: AGENT["TASK_QUEUE"]
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/6")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = test_queue  # and anything else sent here stays on this run's queue too
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # as the README's: a worker holds no turn it cannot start
CELERY_BEAT_SCHEDULE = {
    "agent-sweep-turns": {"task": "agent.sweep_turns", "schedule": 10.0},
    "agent-purge": {"task": "agent.purge_chats", "schedule": 24 * 3600.0},
}

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

AGENT = {"SESSION_WRITE_MODULES": ["notes"], "MODEL_MAX_RETRIES": 0, "LOGOUT_URL": "logout", "TASK_QUEUE": test_queue}
