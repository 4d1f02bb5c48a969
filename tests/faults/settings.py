"""The test site's settings for the fault suite's processes, with some ``AGENT`` keys from the environment.

daphne, the workers and beat of one stack read the same overrides
(``AGENT_FAULTS_SETTINGS``, JSON), so a short lease is the same everywhere.
"""

import json
import os

from tests.settings import *  # noqa: F401,F403
from tests.settings import AGENT, DATABASES

AGENT = {**AGENT, **json.loads(os.environ.get("AGENT_FAULTS_SETTINGS") or "{}")}
# As docs/operations.md runs every process: its database connections in Django's pool.
DATABASES["default"]["OPTIONS"] = {**DATABASES["default"].get("OPTIONS", {}), "pool": {"min_size": 2, "max_size": 10}}
