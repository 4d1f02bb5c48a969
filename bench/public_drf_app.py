"""A public DRF app nobody here wrote, as tools: each call beside the same user's HTTP request.

Installs django-activity-stream (its DRF API: a router of read-only viewsets with ``@action``s,
some with keywords in their ``url_path``, one taking a serializer of its own) and
rest-framework-generic-relations from PyPI into a temporary folder, runs the demo site with it
added (its own database, ``agent_bench_drf``, made if missing), registers its viewsets with
``register_viewset`` as a site owner would, and for one signed-in user compares every read tool's
answer with the same GET over HTTP, then a write: a card confirmed against the same POST.

    .venv/bin/python bench/public_drf_app.py

Prints one line per tool (same / differs / refused as HTTP is) and the tools' definition sizes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["django-activity-stream==2.0.0", "rest-framework-generic-relations==2.2.0"]
DATABASE = "agent_bench_drf"


def install() -> None:
    """The public app, from the package registry, into a folder of this run alone."""
    target = tempfile.mkdtemp(prefix="agent-public-drf-")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target, *PACKAGES], check=True
    )
    sys.path.insert(0, target)


def configure() -> None:
    """The demo site's settings, the public app added and routed at ``api/activity/``."""
    os.environ.setdefault("DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{DATABASE}")
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
    os.environ.setdefault("SECRET_KEY", "bench")
    sys.path.insert(0, str(ROOT))
    _database_made(os.environ["DATABASE_URL"])
    from django.conf import settings

    import agent_project.settings as demo

    values = {name: getattr(demo, name) for name in dir(demo) if name.isupper()}
    values.update(
        INSTALLED_APPS=[*demo.INSTALLED_APPS, "actstream"],
        ROOT_URLCONF=__name__,
        ACTSTREAM_SETTINGS={"DRF": {"ENABLE": True}},
        AGENT={**demo.AGENT, "SESSION_WRITE_MODULES": ["notes", "actstream"]},
        ALLOWED_HOSTS=["127.0.0.1", "testserver"],
        DEBUG=False,
    )
    settings.configure(**values)


def _database_made(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            connection.execute(f'CREATE DATABASE "{name}"')


urlpatterns: list[Any] = []


def main() -> None:
    install()
    configure()
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from actstream import registry as activity

    User = get_user_model()
    activity.register(User)
    from actstream.drf import views
    from actstream.drf.urls import router
    from django.urls import include, path

    import agent_project.urls as demo_urls

    urlpatterns[:] = [*demo_urls.urlpatterns, path("api/activity/", include(router.urls))]
    compare(User, views)


def compare(User: Any, views: Any) -> None:
    from actstream.actions import follow
    from actstream.models import Action
    from actstream.signals import action
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType
    from django.test import Client

    from agent import confirmations
    from agent.access import SessionRef, authorize_session
    from agent.conversations import create_conversation
    from agent.tools import execute_as, registry
    from agent.tools.drf import register_viewset
    from agent.tools.requests import site_host

    Action.objects.all().delete()
    User.objects.filter(username__startswith="public-drf-").delete()
    alice, bob = (User.objects.create(username=f"public-drf-{name}") for name in ("alice", "bob"))
    alice.user_permissions.add(Permission.objects.get(content_type__app_label="agent", codename="use_agent"))
    action.send(bob, verb="wrote", target=alice)
    action.send(alice, verb="answered", target=bob)
    follow(alice, bob)
    client = Client()
    client.force_login(alice)
    ref = SessionRef(session_key=client.session.session_key, user_id=alice.pk)
    scope = authorize_session(ref, impersonated=False)
    chat = create_conversation(ref, {}, impersonated=False)
    user_type = ContentType.objects.get_for_model(User).pk

    tools = [
        *register_viewset(views.ActionViewSet, basename="action", module="actstream"),
        *register_viewset(views.FollowViewSet, basename="follow", module="actstream"),
        *register_viewset(views.registered_viewsets[User], basename="user", module="actstream"),
    ]
    by_name = {tool.name: tool for tool in tools}
    reads = {
        "action_list": ({}, "/api/activity/actions/"),
        "action_retrieve": ({"pk": Action.objects.first().pk}, "/api/activity/actions/{pk}/"),
        "action_my_actions": ({}, "/api/activity/actions/streams/my-actions/"),
        "action_following": ({}, "/api/activity/actions/streams/following/"),
        "action_model_stream": (
            {"content_type_id": user_type},
            "/api/activity/actions/streams/model/{content_type_id}/",
        ),
        "action_actor_stream": (
            {"content_type_id": user_type, "object_id": bob.pk},
            "/api/activity/actions/streams/actor/{content_type_id}/{object_id}/",
        ),
        "action_target_stream": (
            {"content_type_id": user_type, "object_id": alice.pk},
            "/api/activity/actions/streams/target/{content_type_id}/{object_id}/",
        ),
        "action_any_stream": (
            {"content_type_id": user_type, "object_id": bob.pk},
            "/api/activity/actions/streams/any/{content_type_id}/{object_id}/",
        ),
        "follow_list": ({}, "/api/activity/follows/"),
        "follow_following": ({}, "/api/activity/follows/following/"),
        "follow_followers": ({}, "/api/activity/follows/followers/"),
        "follow_is_following": (
            {"content_type_id": user_type, "object_id": bob.pk},
            "/api/activity/follows/is_following/{content_type_id}/{object_id}/",
        ),
        "user_list": ({}, "/api/activity/users/"),
        "user_retrieve": ({"pk": bob.pk}, "/api/activity/users/{pk}/"),
    }
    headers = {"HTTP_ACCEPT": "application/json", "HTTP_HOST": site_host()}
    same = 0
    print(f"{'tool':28} {'HTTP':>5}  result")
    for name, (args, url) in reads.items():
        answer = execute_as(scope, name, args, via="agent", chat=chat, call_id="bench")
        response = client.get(url.format(**args), **headers)
        body = response.json() if response.get("Content-Type", "").startswith("application/json") else None
        matched = answer.outcome == "ok" and answer.result == body
        same += matched
        verdict = "same" if matched else f"differs: {answer.outcome} {json.dumps(answer.result)[:80]}"
        print(f"{name:28} {response.status_code:>5}  {verdict}")
    print(f"reads identical to HTTP: {same} of {len(reads)}")

    sent = {
        "verb": "liked",
        "target_content_type_id": str(user_type),
        "target_object_id": str(bob.pk),
        "action_object_content_type_id": str(user_type),
        "action_object_object_id": str(alice.pk),
        "description": "from the assistant",
        "public": True,
    }
    before = Action.objects.count()
    answer = execute_as(scope, "action_send", sent, via="agent", chat=chat, call_id="bench-send")
    if answer.outcome != "needs_confirmation":
        print(f"action_send: {answer.outcome} {answer.result}")
    else:
        confirmation = confirmations.confirm(ref, answer.confirmation.pk, impersonated=False)
        print(f"action_send card: {confirmation.status}; actions made by the tool: {Action.objects.count() - before}")
    response = client.post("/api/activity/actions/send/", json.dumps(sent), content_type="application/json", **headers)
    print(f"action_send over HTTP: {response.status_code}; actions now {Action.objects.count() - before} more")
    offered = sorted(tool.name for tool in tools if registry.get(tool.name) is not None)
    print(f"tools registered: {len(offered)} ({', '.join(offered)})")
    sizes = [len(json.dumps(by_name[name].definition(scope), separators=(",", ":"))) for name in offered]
    print(f"definition bytes: mean {sum(sizes) / len(sizes):.0f}, largest {max(sizes)}")


if __name__ == "__main__":
    main()
