"""The test site with another site's ``LANGUAGES``, for ``makemigrations`` in a process of its own.

``AGENT_TEST_LANGUAGES`` holds codes (``de,fr``), or ``unset`` for a site that
leaves ``LANGUAGES`` to Django's own list.
"""

import os

from tests.settings import *  # noqa: F403

_codes = os.environ["AGENT_TEST_LANGUAGES"]
if _codes == "unset":
    del LANGUAGES  # noqa: F821
else:
    LANGUAGES = [(code, code.upper()) for code in _codes.split(",")]
    LANGUAGE_CODE = LANGUAGES[0][0]
