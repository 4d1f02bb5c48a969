"""The test site as one host of several: attachments in S3 through django-storages, nothing in a shared folder.

Each host's processes get their own ``MEDIA_ROOT`` (checked empty afterwards)
and the queue their tasks go to (``AGENT_HOSTS_SENDS_TO``), so a test decides
which host's worker reads what another host stored. The database, the channel
layer (``REDIS_URL``, which may be a ``redis+sentinel://`` URL) and the broker
(``CELERY_BROKER_URL``) come from the environment, as for the rest of the
suite; a broker behind Sentinel also needs its master's name
(``AGENT_HOSTS_BROKER_MASTER``), set here as the docs tell a site to.
"""

import os

from tests.settings import *  # noqa: F401,F403
from tests.settings import AGENT

STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "agent_files": {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": os.environ["AGENT_HOSTS_BUCKET"],
            "endpoint_url": os.environ["AGENT_HOSTS_S3_ENDPOINT"],
            "region_name": "eu-north-1",
            "access_key": "hosts-test",
            "secret_key": "hosts-test-secret",
            "addressing_style": "path",
            "querystring_auth": False,
            "max_memory_size": 256 * 1024,  # a larger download spools to a temporary file, not to memory
        },
    },
}
SENDS_TO = os.environ.get("AGENT_HOSTS_SENDS_TO") or AGENT["TASK_QUEUE"]
AGENT = {**AGENT, "ATTACHMENT_STORAGE": "agent_files", "TASK_QUEUE": SENDS_TO}
MEDIA_ROOT = os.environ["AGENT_HOSTS_MEDIA_ROOT"]
CELERY_TASK_DEFAULT_QUEUE = SENDS_TO
if os.environ.get("AGENT_HOSTS_BROKER_MASTER"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"master_name": os.environ["AGENT_HOSTS_BROKER_MASTER"]}
