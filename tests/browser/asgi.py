"""The test site's ASGI app with its static files served, for the browser tests' daphne."""

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

from tests.asgi import application as site

application = ASGIStaticFilesHandler(site)
