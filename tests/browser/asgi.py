"""The site's real ASGI app with its static files served, for the browser tests' daphne."""
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

from agent_project.asgi import application as site

application = ASGIStaticFilesHandler(site)
