"""The release: ``python -m build`` makes a wheel and an sdist that ``twine check`` accepts, with this version,
the README as the long description, and only the dependencies the app imports.

``build`` and ``twine`` come from PyPI into a venv of the test's own, as a maintainer would install them.
"""

from __future__ import annotations

import re
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import agent
from tests.support.packaging import ROOT, pip_env, run, source_copy

pytestmark = [pytest.mark.install, pytest.mark.timeout(420)]


def test_the_package_builds_into_a_wheel_and_an_sdist_that_twine_accepts(tmp_path: Path) -> None:
    # given build and twine from PyPI, and a copy of the sources
    tools = tmp_path / "tools"
    run([sys.executable, "-m", "venv", str(tools)])
    run([str(tools / "bin" / "pip"), "install", "-q", "build", "twine"], env=pip_env())
    source = source_copy(tmp_path / "source")
    # when the package is built
    dist = tmp_path / "dist"
    run([str(tools / "bin" / "python"), "-m", "build", "--outdir", str(dist), str(source)], env=pip_env())
    (wheel,) = dist.glob("django_agent-*.whl")
    (sdist,) = dist.glob("django_agent-*.tar.gz")
    # then twine accepts both, strictly (the long description renders)
    run([str(tools / "bin" / "twine"), "check", "--strict", str(wheel), str(sdist)])
    # and both carry this version, with the README as a Markdown long description
    assert wheel.name.startswith(f"django_agent-{agent.__version__}-") and sdist.name == (
        f"django_agent-{agent.__version__}.tar.gz"
    )
    metadata = Parser().parsestr(
        zipfile.ZipFile(wheel).read(f"django_agent-{agent.__version__}.dist-info/METADATA").decode()
    )
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata.get_payload().strip() == (ROOT / "README.md").read_text().strip()
    # and the core dependencies are what the app imports, with a psycopg build left to the site
    core = [r for r in metadata.get_all("Requires-Dist") if "extra ==" not in r]
    names = {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in core}
    psycopg_extras = {e.strip() for r in core for m in re.findall(r"psycopg\[([^\]]*)\]", r) for e in m.split(",")}
    assert "django-environ" not in names and not psycopg_extras & {"binary", "c"}  # the pool extra is pure Python
    assert any(re.fullmatch(r"django\s*(<7,>=5\.2|>=5\.2,<7)", r) for r in core), core
    assert {"Framework :: Django :: 5.2", "Programming Language :: Python :: 3.13"} <= set(
        metadata.get_all("Classifier")
    )
    # and the sdist holds the changelog, whose newest release is this version
    with tarfile.open(sdist) as archive:
        inside = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"CHANGELOG.md", "LICENSE", "README.md", "pyproject.toml", "agent/core/statements.py"} <= inside
    releases = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert releases[0] == agent.__version__
