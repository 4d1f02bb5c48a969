"""A Celery worker in the test process: two threads taking turns off this run's queue."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from django.conf import settings


@contextmanager
def thread_worker() -> Iterator[Any]:
    from celery.contrib.testing.worker import start_worker

    from tests.celery_app import app

    with start_worker(
        app,
        pool="threads",
        concurrency=2,
        perform_ping_check=False,
        queues=[settings.CELERY_TASK_DEFAULT_QUEUE],
        loglevel="WARNING",
        shutdown_timeout=10,
    ) as started:
        yield started
