"""Settings of the host site, read from the environment.

With no environment at all this is the embedded default: SQLite, the in-memory
channel layer and Celery's in-memory broker (the demo runs a worker in its own
process). Production switches by environment variables alone:
``DATABASE_URL``, ``REDIS_URL`` (channel layer), ``CELERY_BROKER_URL`` and, for
several hosts, ``FILES_BUCKET`` (the chats' files in S3; ``FILES_ENDPOINT_URL``
and ``FILES_REGION`` for an S3-compatible server; credentials from boto3's chain).
"""

from pathlib import Path

import environ

from agent.schedule import BEAT_SCHEDULE

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="insecure-demo-key-change-me" if DEBUG else "")
if not SECRET_KEY:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("Set SECRET_KEY (or DEBUG=true for the demo).")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "agent",
    "agent_project.notes",
    "agent_project.demo",
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

ROOT_URLCONF = "agent_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "agent_project" / "templates"],
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
WSGI_APPLICATION = None
ASGI_APPLICATION = "agent_project.asgi.application"

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Turn workers and the web share the file: wait for a lock instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
else:
    # Every process (daphne, the workers) keeps its connections in Django's pool: no request, socket
    # read or task opens a PostgreSQL session (docs/operations.md, "Database connections").
    # DATABASE_POOL_SIZE=0 turns it off.
    if pool_size := env.int("DATABASE_POOL_SIZE", default=10):
        DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps them
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {"min_size": 2, "max_size": pool_size, "timeout": 30}
    if env.bool("DATABASE_PREPARED_STATEMENTS", default=False):
        # Statements bound and prepared on the server: the turn's checks are planned once per connection.
        # Not behind PgBouncer in transaction mode before 1.21 (docs/operations.md).
        DATABASES["default"].setdefault("OPTIONS", {}).update({"server_side_binding": True, "prepare_threshold": 5})
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    from agent.layers import redis_channel_layer  # socket timeout, capacity and pool set for many idle sockets

    CHANNEL_LAYERS = {"default": redis_channel_layer(REDIS_URL)}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="memory://")
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # a worker takes a turn only when it can start it
CELERY_BEAT_SCHEDULE = BEAT_SCHEDULE

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "agent:chat"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("ru", "Русский"), ("et", "Eesti")]
LOCALE_PATHS = [BASE_DIR / "locale"]  # the demo site's own phrases (agent ships its own catalogues)
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
MEDIA_ROOT = env.path("MEDIA_ROOT", default=BASE_DIR / "media")  # uploads: git-ignored, outside the app's package

STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
FILES_BUCKET = env.str("FILES_BUCKET", default="")
if FILES_BUCKET:
    # Several hosts: the chats' files in S3 or an S3-compatible server (the s3 extra), read by every process.
    STORAGES["agent_files"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": FILES_BUCKET,
            "endpoint_url": env.str("FILES_ENDPOINT_URL", default="") or None,
            "region_name": env.str("FILES_REGION", default="") or None,
            "max_memory_size": 2 * 1024 * 1024,
        },
    }
elif not REDIS_URL:
    SILENCED_SYSTEM_CHECKS = ["agent.W007"]  # one process, one machine: a folder is all the files need

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

AGENT = {"SESSION_WRITE_MODULES": ["notes"], "LOGOUT_URL": "logout"}
if FILES_BUCKET:
    AGENT["ATTACHMENT_STORAGE"] = "agent_files"
# The assistant in Telegram: the bot's token from @BotFather turns it on (docs/operations.md, "Telegram").
if env.str("TELEGRAM_TOKEN", default=""):
    AGENT["TELEGRAM"] = {
        "TOKEN_ENV": "TELEGRAM_TOKEN",
        "BOT_USERNAME": env.str("TELEGRAM_BOT_USERNAME"),
        "MODE": env.str("TELEGRAM_MODE", default="polling"),
        "SECRET": env.str("TELEGRAM_SECRET", default=""),
        "BASE_URL": env.str("TELEGRAM_BASE_URL", default="") or None,
    }

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"agent": {"handlers": ["console"], "level": env.str("AGENT_LOG_LEVEL", default="INFO")}},
}
