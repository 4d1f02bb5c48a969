# The test site loads its Celery app with the package, as the README tells a site to, so its web
# processes queue turns on the site's broker and queue.
from .celery_app import app as celery_app

__all__ = ["celery_app"]
