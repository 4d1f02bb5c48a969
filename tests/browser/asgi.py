"""The test site's ASGI app with its static files served, for the browser tests' daphne."""
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

from tests.asgi import application as site
from tests.celery_app import app as celery_app  # noqa: F401  the web process queues turns on the site's app

application = ASGIStaticFilesHandler(site)
