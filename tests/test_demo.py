"""The demo: its offline model and a whole turn through it, with no network."""
import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from agent import conversations, turns
from agent.ai import offline
from agent.models import AgentSettings
from agent.tasks import run_turn
from agent_project.notes.models import Note

from .conftest import login

NOTES_TOOLS = [{"type": "function", "function": {"name": n}} for n in ("notes_search", "notes_read", "notes_create")]


def test_offline_model_searches_before_it_proposes_a_note():
    first = offline.reply([{"role": "user", "content": "create a note: Buy milk"}], NOTES_TOOLS)
    assert first["tool_calls"][0]["function"]["name"] == "notes_search"
    second = offline.reply(
        [{"role": "user", "content": "create a note: Buy milk"}, first,
         {"role": "tool", "tool_call_id": "x", "content": '{"notes": [], "count": 0}'}],
        NOTES_TOOLS,
    )
    call = second["tool_calls"][0]["function"]
    assert call["name"] == "notes_create" and '"Buy milk"' in call["arguments"]


def test_offline_model_labels_its_answers_and_speaks_russian():
    answer = offline.reply([{"role": "user", "content": "привет"}], [])
    assert "tool_calls" not in answer and offline.LABEL["ru"] in answer["content"]
    assert offline.LABEL["en"] in offline.reply([{"role": "user", "content": "hello"}], [])["content"]


@pytest.mark.django_db(transaction=True)
def test_demo_turn_reads_then_waits_for_confirmation_of_a_note():
    # given the demo set up (demo user, offline endpoint as the site default)
    call_command("demo", no_serve=True, stdout=io.StringIO())
    assert AgentSettings.current().default_endpoint.model == offline.MODEL_NAME
    user = get_user_model().objects.get(username="demo")
    _client, ref = login(user)
    chat = conversations.create_conversation(ref, {}, impersonated=False)
    # when the user asks for a note
    turn = turns.start(ref, chat.pk, "create a note: Buy milk", impersonated=False)
    run_turn(str(turn.pk))
    # then the model read through a tool and the write waits on a card
    messages = conversations.get_conversation(ref, chat.pk, impersonated=False)["messages"]
    tools = [(m["tool_name"], m["tool_outcome"]) for m in messages if m["role"] == "tool"]
    assert tools == [("notes_search", "ok"), ("notes_create", "needs_confirmation")]
    card = messages[-1]["confirmation"]
    assert card["status"] == "waiting" and card["preview"]["title"] == "Buy milk"
    assert not Note.objects.filter(title="Buy milk").exists()
