"""The README's marked blocks, which the fresh-site test applies in order.

A block follows a marker comment, ``<!-- fresh-site: ACTION [TARGET] -->``:
``run`` (shell commands, one a line), ``write`` and ``append`` (a file of the
site), ``shell`` (fed to ``manage.py shell``), ``serve`` (the processes to run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MARKER = r"^<!-- fresh-site: (?P<action>\w+)(?: (?P<target>\S+))? -->\n"
BLOCK = re.compile(MARKER + r"```\w*\n(?P<text>.*?)^```", re.M | re.S)
ACTIONS = {"run", "write", "append", "shell", "serve"}


@dataclass(frozen=True)
class Step:
    action: str
    target: str | None
    text: str


def steps(readme: Path) -> list[Step]:
    found = [Step(m["action"], m["target"], m["text"]) for m in BLOCK.finditer(readme.read_text())]
    unknown = sorted({step.action for step in found} - ACTIONS)
    assert not unknown, f"the README marks blocks with unknown actions {unknown}"
    return found
