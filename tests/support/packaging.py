"""The package built as a user gets it: from a copy of what it is made of, with pip and PyPI's tools."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["agent", "docs", "pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "CHANGELOG.md"]
PIP_CACHE = Path(os.environ.get("PIP_CACHE_DIR") or Path.home() / ".cache" / "pip")


def source_copy(where: Path) -> Path:
    """What the package is made of, copied to ``where`` (a stale build/ in the tree cannot leak in)."""
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, where / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            where.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, where / name)
    return where


def pip_env() -> dict[str, str]:
    """This environment without what would point a new venv's Python at this tree or this venv."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DJANGO_", "VIRTUAL_ENV"))} | {
        "PIP_CACHE_DIR": str(PIP_CACHE),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def run(
    args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, stdin: str | None = None
) -> str:
    started = time.monotonic()
    result = subprocess.run(args, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, (
        f"{shlex.join(args)} exited with {result.returncode} after {time.monotonic() - started:.0f} s:\n"
        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result.stdout
