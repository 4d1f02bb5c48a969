"""The demo site's production settings as ``load.py`` runs its processes, but for the socket's frame limit.

A bench user sends its next message the moment the last answer ends: with an instant model that is more
often than ``WS_FRAMES_PER_10S`` lets any person send (40 frames in 10 s), and the socket would be closed
(4429) as soon as the machine turns a user over four times a second. Nothing else differs.
"""

from agent_project.settings import *  # noqa: F403
from agent_project.settings import AGENT

AGENT = {**AGENT, "WS_FRAMES_PER_10S": 10_000}
