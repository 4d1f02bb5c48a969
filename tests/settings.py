"""Test settings: the host site on the real PostgreSQL and Redis at 127.0.0.1.

Two suites can run side by side with their own ``DATABASE_URL``, ``REDIS_URL``,
``CELERY_BROKER_URL`` and ``AGENT_TEST_QUEUE``.
"""
import os

os.environ.setdefault("DEBUG", "false")
os.environ.setdefault("SECRET_KEY", "tests-only-secret")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/agent")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/5")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/6")

from agent_project.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("AGENT_TEST_QUEUE", "agent-tests")
AGENT = {"SESSION_WRITE_MODULES": ["notes"], "MODEL_MAX_RETRIES": 0}
