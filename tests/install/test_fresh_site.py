"""A new user's path: the built wheel in a fresh venv, a new site set up as the README says, a turn end to end.

The site is made by ``django-admin startproject`` in a temporary directory, with
nothing of this source tree on its path, from the README's own marked blocks
(``tests/support/readme.py``). It runs on PostgreSQL (its own database) and
Redis: daphne, a separate Celery worker of threads and beat, as the README's
"Run it" starts them. A turn goes from the chat page's HTTP API through a read
tool and a confirmed write, its events arriving on the page's websocket; the
model is the scripted server of ``tests/support/model_server.py``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings

from agent.core.conf import agent_settings
from tests.support.live_site import Visitor, frames_until, log_tail, next_frame, start, stop, wait_for_port
from tests.support.model_server import answer, tool_calls
from tests.support.packaging import ROOT, pip_env, run, source_copy
from tests.support.readme import Step, steps
from tests.support.waiting import free_port, wait_until

SITE_FILES = {
    "mysite/settings.py",
    "mysite/asgi.py",
    "mysite/celery.py",
    "mysite/__init__.py",
    "mysite/urls.py",
    "templates/registration/login.html",
    "todo/models.py",
    "todo/tools.py",
}
README_QUEUE = "agent"  # the queue the README's settings name and its worker takes
USER, PASSWORD = "alice", "a-long-test-password-1"
ADMIN, ADMIN_PASSWORD = "admin", "a-long-admin-password-1"

pytestmark = [pytest.mark.install, pytest.mark.timeout(420)]


def test_a_site_set_up_as_the_readme_says_carries_a_turn_through_a_read_and_a_confirmed_write(tmp_path, model_server):
    # given the wheel, installed into a fresh venv
    wheel = build_wheel(tmp_path / "dist")
    python = make_venv(tmp_path / "venv", wheel)
    site = Site(tmp_path / "work", python, database=f"{settings.DATABASES['default']['NAME']}_fresh_site")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        # and a new site, set up block by block as the README says (its database too)
        serve = site.apply(steps(ROOT / "README.md"))
        site.prepare(model_server.base_url)
        for command in serve:
            processes.append(site.start(command))
        wait_for_port(site.port, processes[0], site.logs / "daphne.log", timeout=60)

        # when a user signs in and asks, over the chat page's API, with its websocket open
        visitor = Visitor(f"http://127.0.0.1:{site.port}")
        assert "/accounts/login/" in visitor.request("/assistant/")[2]
        visitor.login("/accounts/login/?next=/assistant/", USER, PASSWORD)
        status, page = visitor.get("/assistant/")
        assert status == 200 and "agent/chat/main.js" in page
        status, page, _url = visitor.request("/assistant/", headers={"Accept-Language": "ru"})
        assert '<html lang="ru">' in page and "Новый чат" in page  # the wheel's compiled catalogues are found
        with visitor.websocket("/ws/agent/") as socket:
            assert next_frame(socket)["type"] == "ready"
            chat = visitor.api("/assistant/api/conversations/new/", {})[1]["conversation"]["id"]
            socket.send(json.dumps({"type": "subscribe", "conversation": chat}))
            assert frames_until(socket, lambda f: f["type"] == "subscribed")

            model_server.push(tool_calls(("todo_list", {})), answer("You have no tasks yet."))
            assert visitor.api(f"/assistant/api/conversations/{chat}/send/", {"text": "What is on my list?"})[0] == 200
            # then the read tool runs in the worker and the answer arrives on the socket
            seen = frames_until(socket, lambda f: _message(f, role="assistant", content="You have no tasks yet."))
            assert any(_message(f, role="tool", tool_name="todo_list", tool_outcome="ok") for f in seen)
            drafts = [f["text"] for f in seen if f["type"] == "delta"]  # it streamed in before it was stored
            assert drafts and all("You have no tasks yet.".startswith(text) for text in drafts)
            wait_until(lambda: not visitor.api(f"/assistant/api/conversations/{chat}/")[1]["turn"], 30, "turn end")

            # when the model proposes a write
            model_server.push(tool_calls(("todo_add", {"title": "Buy milk"})))
            assert visitor.api(f"/assistant/api/conversations/{chat}/send/", {"text": "Add: buy milk"})[0] == 200
            seen = frames_until(socket, lambda f: _message(f, role="tool", tool_name="todo_add"))
            confirmation = seen[-1]["message"]["confirmation"]
            # then it waits on a card, and nothing is written before Confirm
            assert confirmation["status"] == "waiting" and confirmation["preview"]["title"] == "Buy milk"
            assert site.tasks() == []
            wait_until(lambda: not visitor.api(f"/assistant/api/conversations/{chat}/")[1]["turn"], 30, "turn end")
            status, decided = visitor.api(f"/assistant/api/confirmations/{confirmation['id']}/confirm/", {})
            assert (status, decided["confirmation"]["status"]) == (200, "done")
            frames_until(
                socket,
                lambda f: (
                    f["type"] == "message"
                    and (f["message"].get("confirmation") or {}).get("status") == "done"
                    and f["message"]["role"] != "tool"
                ),
            )
        assert site.tasks() == [["Buy milk", USER]]

        # and every assistant page of the admin renders for a superuser
        staff = Visitor(visitor.base_url)
        staff.login("/admin/login/?next=/admin/", ADMIN, ADMIN_PASSWORD)
        pages = render_admin_pages(staff)
        assert {"endpoint", "agentsettings", "conversation", "turn", "confirmation", "airequest"} <= set(pages)
        assert "Cost by user and day" in pages["airequest"]  # the app's own admin template, from the wheel
    except BaseException:
        for log in sorted(site.logs.glob("*.log")):  # shown with the failure: what daphne and the worker said
            print(f"--- {log.name}\n{log_tail(log, 60)}")
        raise
    finally:
        for process in reversed(processes):
            stop(process)
        site.drop_database()


# -- the package ----------------------------------------------------------------------


def build_wheel(dist: Path) -> Path:
    """The wheel, built from a copy of what it is made of."""
    source = source_copy(dist.parent / "source")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)], env=pip_env())
    (wheel,) = dist.glob("django_agent-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"agent", wheel.name.split("-py3")[0] + ".dist-info"}
    packaged = {path.relative_to(ROOT).as_posix() for path in (ROOT / "agent").rglob("*") if _shipped(path)}
    assert packaged - set(names) == set(), "files of the app missing from the wheel"
    assert "agent/templates/admin/agent/airequest/change_list.html" in names
    assert any(n.endswith("licenses/LICENSE") for n in names)
    return wheel


def _shipped(path: Path) -> bool:
    """A file of the app that is not Python code, or a migration: what a packaging mistake leaves out."""
    migration = path.parent.name == "migrations" and path.suffix == ".py"
    return path.is_file() and (path.suffix in (".html", ".js", ".css", ".mo", ".typed") or migration)


def make_venv(venv: Path, wheel: Path) -> Path:
    """A new venv (no system site-packages) with the wheel and its dependencies from the package index,
    and what else the README's install command names (a psycopg build).

    This venv's pip installs into it (``--python``): the new one needs no pip of its own, and
    skipping ensurepip and byte-compiling saves most of a minute.
    """
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-compile"]
    run([*install, str(wheel), *readme_install_extras()], env=pip_env())
    return python


def readme_install_extras() -> list[str]:
    """What the README's install command installs beside the package."""
    commands = re.findall(r"^python -m pip install django-agent\b(.*)$", (ROOT / "README.md").read_text(), re.M)
    assert commands, "the README no longer says `python -m pip install django-agent ...`"
    return shlex.split(commands[0])


# -- the site -----------------------------------------------------------------------------


class Site:
    """A site in ``work``, run by the fresh venv's Python with nothing of this tree on its path."""

    def __init__(self, work: Path, python: Path, *, database: str) -> None:
        self.cwd = work
        self.python = python
        self.logs = work.parent / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.queue = README_QUEUE
        db = settings.DATABASES["default"]
        self.server = {
            "host": db["HOST"] or "127.0.0.1",
            "port": db["PORT"] or 5432,
            "user": db["USER"] or "postgres",
            "password": db["PASSWORD"] or None,
        }
        self.database = database
        self.env = {
            "PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/root"),
            "LANG": "C.UTF-8",
            "POSTGRES_DB": database,
            "POSTGRES_USER": self.server["user"],
            "POSTGRES_HOST": self.server["host"],
            "POSTGRES_PASSWORD": self.server["password"] or "",
            "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/5"),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        }

    def drop_database(self) -> None:
        with self._postgres() as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')

    def _postgres(self) -> psycopg.Connection[Any]:
        return psycopg.connect(dbname="postgres", autocommit=True, **self.server)

    def apply(self, readme_steps: list[Step]) -> list[str]:
        """Do what the README's marked blocks say; the commands of its "Run it" block."""
        written = {step.target for step in readme_steps if step.action in ("write", "append")}
        assert SITE_FILES <= written, f"the README no longer marks {sorted(SITE_FILES - written)}"
        serve: list[str] = []
        for step in readme_steps:
            if step.action == "run":
                for line in step.text.splitlines():
                    self.run_line(line)
            elif step.action in ("write", "append"):
                path = self.cwd / str(step.target)
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "a" if step.action == "append" else "w") as file:
                    file.write(("\n\n" if step.action == "append" else "") + step.text)
            elif step.action == "shell":
                self.manage("shell", stdin=step.text)
            else:
                serve += [line for line in step.text.splitlines() if line.strip()]
        assert [line.split()[0] for line in serve] == ["daphne", "celery", "celery"]
        worker = shlex.split(serve[1])
        assert worker[worker.index("-Q") + 1] == README_QUEUE, "the worker takes another queue"
        assert worker[worker.index("-P") + 1] == "threads", "a turn waiting on the model holds a process"
        self.queue_on(agent_settings.TASK_QUEUE)
        return serve

    def queue_on(self, queue: str) -> None:
        """This run's own Celery queue in place of the README's, so no other suite's worker takes its tasks."""
        with open(self.cwd / "mysite" / "settings.py", "a") as file:
            file.write(f"\n\nAGENT['TASK_QUEUE'] = {queue!r}  # the test run's queue\n")
        self.queue = queue

    def run_line(self, line: str) -> None:
        words = shlex.split(line)
        if not words:
            return
        if words[0] == "cd":
            self.cwd = self.cwd / words[1]
            return
        if words[0] == "createdb":  # as the README says, for this run's own database (POSTGRES_DB)
            assert words[-1] == "mysite", f"the README creates {words[-1]!r}, not the database its settings name"
            self.drop_database()  # one an earlier run left
            run([*words[:-1], self.database], cwd=self.cwd, env=self.env)
            return
        run(words, cwd=self.cwd, env=self.env)

    def manage(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
        return run([str(self.python), "manage.py", *args], cwd=self.cwd, env=self.env | (env or {}), stdin=stdin)

    def prepare(self, model_url: str) -> None:
        """What the README leaves to a person: a superuser, a user in its group, the endpoint in the admin."""
        where = self.manage("shell", "-c", "import agent, sys; print(agent.__file__, agent.__version__, sys.path)")
        where = where.strip().splitlines()[-1]  # the shell may first say what it imported
        assert where.startswith(str(self.python.parent.parent)) and str(ROOT) not in where
        self.manage(
            "createsuperuser",
            "--noinput",
            env={
                "DJANGO_SUPERUSER_USERNAME": ADMIN,
                "DJANGO_SUPERUSER_PASSWORD": ADMIN_PASSWORD,
                "DJANGO_SUPERUSER_EMAIL": "admin@example.com",
            },
        )
        self.manage(
            "shell",
            stdin=f"""
from django.contrib.auth.models import Group, User
from agent.models import AgentSettings, Endpoint
user = User.objects.create_user({USER!r}, password={PASSWORD!r})
user.groups.add(Group.objects.get(name="Assistant users"))
endpoint = Endpoint.objects.create(name="scripted", base_url={model_url!r}, model="scripted-model", api_key="sk-test")
site = AgentSettings.current()
site.default_endpoint = endpoint
site.save()
""",
        )
        self.manage("check", "--fail-level", "WARNING")  # the README's wiring draws no warning of ours
        self.manage("makemigrations", "--check", "--dry-run")  # and the app's migration state is its own
        self.manage("findstatic", "agent/chat/main.js")

    def start(self, command: str) -> subprocess.Popen[bytes]:
        words = shlex.split(command)
        if words[0] == "daphne":
            words[words.index("-p") + 1] = str(self.port)
        if "-Q" in words:
            words[words.index("-Q") + 1] = self.queue
        name = words[0] if words[0] == "daphne" else f"celery-{words[3]}"
        executable = self.python.parent / words[0]
        return start([str(executable), *words[1:]], log=self.logs / f"{name}.log", cwd=self.cwd, env=self.env)

    def tasks(self) -> list[list[str]]:
        out = self.manage(
            "shell",
            "-c",
            "import json; from todo.models import Task; "
            "print(json.dumps(list(Task.objects.values_list('title', 'owner__username'))))",
        )
        return json.loads(out.strip().splitlines()[-1])


# -- the page's websocket and the admin --------------------------------------------------------


def _message(frame: dict[str, Any], **fields: Any) -> bool:
    message = frame.get("message") if frame.get("type") == "message" else None
    return message is not None and all(message.get(key) == value for key, value in fields.items())


def render_admin_pages(staff: Visitor) -> dict[str, str]:
    """Each model page of the app's admin section, with its add page and its first object's page."""
    status, index = staff.get("/admin/agent/")
    assert status == 200, index[:2000]
    pages = {}
    for model in sorted(set(re.findall(r'href="/admin/agent/(\w+)/"', index))):
        status, listing = staff.get(f"/admin/agent/{model}/")
        assert status == 200, f"/admin/agent/{model}/ answered {status}:\n{listing[:2000]}"
        pages[model] = listing
        add = [f"/admin/agent/{model}/add/"] if f'href="/admin/agent/{model}/add/"' in index else []
        first = re.findall(rf'href="(/admin/agent/{model}/[^"/]+/change/)', listing)[:1]
        for link in add + first:
            status, page = staff.get(link)
            assert status == 200, f"{link} answered {status}:\n{page[:2000]}"
    return pages
