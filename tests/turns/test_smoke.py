import pytest

from agent import turns
from agent.conversations import create_conversation, get_conversation
from agent.tasks import run_turn
from tests.support.model_server import tool_calls

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_turn_reads_then_proposes_a_write(ref, endpoint, model_server):
    chat = create_conversation(ref, {}, impersonated=False)
    model_server.push(
        tool_calls(("notes_search", {"query": "milk"})),
        tool_calls(("notes_create", {"title": "Buy milk"})),
    )
    turn = turns.start(ref, chat.pk, "make a note to buy milk", impersonated=False)
    run_turn(str(turn.pk))
    view = get_conversation(ref, chat.pk, impersonated=False)
    roles = [(m["role"], m["tool_outcome"]) for m in view["messages"]]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("tool", "ok"),
        ("assistant", None),
        ("tool", "needs_confirmation"),
    ]
    turn.refresh_from_db()
    assert turn.status == "finished" and turn.session_key == ""
