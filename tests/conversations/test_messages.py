"""Writing a message and what a client sees of one."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, Callable

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from agent.access import SessionRef, authorize_session
from agent.conversations import (
    add_message,
    append_message,
    client_view,
    create_conversation,
    get_conversation,
    get_message,
    list_messages,
    message_view,
    rename_conversation,
    topic,
)
from agent.models import Attachment, Conversation, Message

pytestmark = pytest.mark.django_db

SECRET = "sk-secret-result-7f3a"


# -- add_message ---------------------------------------------------------------------------


def test_add_message_reads_only_the_content(ref: SessionRef, chat: Conversation) -> None:
    attrs = {
        "content": "hello",
        "role": "assistant",
        "tool_calls": [{"id": "c", "name": "x"}],
        "tool_name": "notes_create",
        "tool_outcome": "ok",
        "tool_result": {"x": 1},
        "notice_code": "stopped",
        "input_tokens": 99,
        "output_tokens": 99,
        "cost_usd": "9.9",
        "model": "gpt",
        "partial": True,
        "seq": 77,
        "conversation": "elsewhere",
    }
    message = Message.objects.get(pk=add_message(ref, chat.pk, attrs, impersonated=False).pk)
    assert (message.role, message.content, message.seq, message.conversation_id) == ("user", "hello", 1, chat.pk)
    assert message.tool_calls is None and message.tool_result is None
    assert (message.tool_name, message.tool_outcome, message.notice_code, message.model) == ("", "", "", "")
    assert (message.input_tokens, message.output_tokens, message.cost_usd) == (None, None, None)
    assert message.partial is False


def test_add_message_stores_the_text_unstripped(ref: SessionRef, chat: Conversation) -> None:
    message = add_message(ref, chat.pk, {"content": "  two spaces \n"}, impersonated=False)
    assert Message.objects.get(pk=message.pk).content == "  two spaces \n"


@pytest.mark.parametrize("content", ["", "   ", "\n\t", None, 42, ["hi"]], ids=repr)
def test_blank_or_non_text_content_is_a_validation_error_on_content(
    ref: SessionRef, chat: Conversation, content: Any
) -> None:
    with pytest.raises(ValidationError) as invalid:
        add_message(ref, chat.pk, {"content": content}, impersonated=False)
    assert "content" in invalid.value.message_dict
    assert not Message.objects.filter(conversation=chat).exists()


def test_missing_content_is_a_validation_error_on_content(ref: SessionRef, chat: Conversation) -> None:
    with pytest.raises(ValidationError) as invalid:
        add_message(ref, chat.pk, {}, impersonated=False)
    assert "content" in invalid.value.message_dict


def test_content_over_history_chars_is_a_validation_error(ref: SessionRef, chat: Conversation) -> None:
    with pytest.raises(ValidationError) as invalid:
        add_message(ref, chat.pk, {"content": "a" * 32_001}, impersonated=False)
    assert "content" in invalid.value.message_dict
    assert Conversation.objects.get(pk=chat.pk).message_count == 0


def test_content_of_exactly_history_chars_is_stored(ref: SessionRef, chat: Conversation) -> None:
    add_message(ref, chat.pk, {"content": "a" * 32_000}, impersonated=False)
    assert Conversation.objects.get(pk=chat.pk).message_count == 1


def test_the_history_chars_setting_bounds_the_content(ref: SessionRef, chat: Conversation, settings: Any) -> None:
    settings.AGENT = {**settings.AGENT, "HISTORY_CHARS": 10}
    with pytest.raises(ValidationError):
        add_message(ref, chat.pk, {"content": "a" * 11}, impersonated=False)


def test_add_message_counts_the_message_and_sets_last_message_at(ref: SessionRef, chat: Conversation) -> None:
    old = timezone.now() - timedelta(days=3)
    Conversation.objects.filter(pk=chat.pk).update(last_message_at=old)
    add_message(ref, chat.pk, {"content": "one"}, impersonated=False)
    second = add_message(ref, chat.pk, {"content": "two"}, impersonated=False)
    chat.refresh_from_db()
    assert chat.message_count == 2 and second.seq == 2
    assert chat.last_message_at == second.created_at and chat.last_message_at > old


def test_the_first_message_titles_an_untitled_chat_collapsed_to_sixty_chars(
    ref: SessionRef, chat: Conversation
) -> None:
    text = "  Buy\n\n milk\tand   bread " + "x" * 100
    add_message(ref, chat.pk, {"content": text}, impersonated=False)
    title = Conversation.objects.get(pk=chat.pk).title
    assert title == ("Buy milk and bread " + "x" * 100)[:60] and len(title) == 60


def test_a_later_message_does_not_change_the_auto_title(ref: SessionRef, chat: Conversation) -> None:
    add_message(ref, chat.pk, {"content": "first"}, impersonated=False)
    add_message(ref, chat.pk, {"content": "second"}, impersonated=False)
    assert Conversation.objects.get(pk=chat.pk).title == "first"


def test_a_chat_with_a_title_keeps_it(ref: SessionRef) -> None:
    chat = create_conversation(ref, {"title": "Mine"}, impersonated=False)
    add_message(ref, chat.pk, {"content": "hello"}, impersonated=False)
    assert Conversation.objects.get(pk=chat.pk).title == "Mine"


def test_a_renamed_chat_keeps_its_name_on_the_first_message(ref: SessionRef, chat: Conversation) -> None:
    rename_conversation(ref, chat.pk, "Named", impersonated=False)
    add_message(ref, chat.pk, {"content": "hello"}, impersonated=False)
    assert Conversation.objects.get(pk=chat.pk).title == "Named"


def test_message_added_is_sent_only_after_commit_and_carries_uuids_only(
    ref: SessionRef,
    chat: Conversation,
    django_capture_on_commit_callbacks: Callable[..., Any],
    capture_events: list[tuple[str, dict[str, Any]]],
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        message = add_message(ref, chat.pk, {"content": "a private thought"}, impersonated=False)
    assert capture_events == []
    for callback in callbacks:
        callback()
    event = {"type": "agent.message_added", "conversation": str(chat.pk), "message": str(message.pk)}
    assert capture_events == [(topic(chat.pk), event)]
    assert "private" not in json.dumps(capture_events)


def test_a_refused_add_message_sends_no_event(
    ref: SessionRef, chat: Conversation, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        with pytest.raises(ValidationError):
            add_message(ref, chat.pk, {"content": " "}, impersonated=False)
    assert callbacks == []


# -- what a client sees ----------------------------------------------------------------------


def tool_message(chat: Conversation, result: Any, *, truncated: bool = False) -> Message:
    return append_message(
        chat.pk,
        role=Message.Role.TOOL,
        tool_call_id="call_1",
        tool_name="notes_search",
        tool_outcome=Message.ToolOutcome.OK,
        tool_result=result,
        tool_result_truncated=truncated,
        content="",
    )


READERS: dict[str, Callable[[SessionRef, Conversation, Message], dict[str, Any]]] = {
    "get_conversation": lambda ref, chat, m: next(
        v for v in get_conversation(ref, chat.pk, impersonated=False)["messages"] if v["id"] == str(m.pk)
    ),
    "get_message": lambda ref, chat, m: get_message(ref, chat.pk, m.pk, impersonated=False),
    "list_messages": lambda ref, chat, m: next(
        v for v in list_messages(ref, chat.pk, impersonated=False) if v["id"] == str(m.pk)
    ),
}


@pytest.mark.parametrize("reader", READERS)
def test_a_tool_message_is_seen_without_its_result(ref: SessionRef, chat: Conversation, reader: str) -> None:
    message = tool_message(chat, {"items": [{"title": SECRET}, {"title": "b"}]}, truncated=True)
    view = READERS[reader](ref, chat, message)
    assert view["tool_result"] is None
    assert view["tool_summary"] == {"name": "notes_search", "outcome": "ok", "count": 2, "truncated": True}
    assert SECRET not in json.dumps(view)


@pytest.mark.parametrize("reader", READERS)
def test_an_assistant_message_keeps_only_id_and_name_of_its_tool_calls(
    ref: SessionRef, chat: Conversation, reader: str
) -> None:
    calls = [
        {"id": "call_1", "name": "notes_search", "arguments": json.dumps({"query": SECRET}), "type": "function"},
        {"id": "call_2", "name": "notes_create", "arguments": "{}"},
    ]
    message = append_message(chat.pk, role=Message.Role.ASSISTANT, content="", tool_calls=calls)
    view = READERS[reader](ref, chat, message)
    assert view["tool_calls"] == [{"id": "call_1", "name": "notes_search"}, {"id": "call_2", "name": "notes_create"}]
    assert SECRET not in json.dumps(view)


@pytest.mark.parametrize(
    "result, count",
    [
        ([1, 2, 3], 3),
        ([], 0),
        ({"notes": [1, 2]}, 2),
        ({"notes": [1, 2], "query": "milk"}, 2),
        ({"count": 7, "notes": [1]}, 7),
        ({"total": 4}, 4),
        ({"a": [1], "b": [2, 3]}, None),
        ({"title": "x"}, None),
        ({"count": "many"}, None),
        ({"count": True}, None),
        ({"count": -1}, None),
        ("plain text", None),
        (None, None),
        (5, None),
    ],
    ids=repr,
)
def test_the_tool_summary_counts_one_list_or_count_or_total(chat: Conversation, result: Any, count: int | None) -> None:
    assert client_view(tool_message(chat, result))["tool_summary"]["count"] == count


def test_a_non_tool_message_has_no_tool_summary(chat: Conversation) -> None:
    message = append_message(chat.pk, role=Message.Role.USER, content="hi")
    view = client_view(message)
    assert view["tool_summary"] is None and view["tool_result"] is None and view["tool_calls"] is None


def test_the_client_view_says_whether_an_answer_was_cut_short(ref: SessionRef, chat: Conversation) -> None:
    whole = append_message(chat.pk, role=Message.Role.ASSISTANT, content="All of it.")
    cut = append_message(chat.pk, role=Message.Role.ASSISTANT, content="Half of", partial=True)
    assert (client_view(whole)["partial"], client_view(cut)["partial"]) == (False, True)
    listed = list_messages(ref, chat.pk, impersonated=False)
    assert [m["partial"] for m in listed] == [False, True]
    assert get_message(ref, chat.pk, cut.pk, impersonated=False)["partial"] is True


def test_a_message_created_directly_is_seen_the_same_way(chat: Conversation) -> None:
    message = Message.objects.create(
        conversation=chat,
        seq=1,
        role=Message.Role.TOOL,
        tool_name="notes_search",
        tool_outcome="error",
        tool_result={"error": SECRET},
    )
    view = client_view(message)
    assert view["tool_summary"] == {"name": "notes_search", "outcome": "error", "count": None, "truncated": False}
    assert SECRET not in json.dumps(view)


def test_get_conversation_gives_the_messages_oldest_first(ref: SessionRef, chat: Conversation) -> None:
    for text in ("one", "two", "three"):
        add_message(ref, chat.pk, {"content": text}, impersonated=False)
    view = get_conversation(ref, chat.pk, impersonated=False)
    assert [m["content"] for m in view["messages"]] == ["one", "two", "three"]
    assert view["id"] == str(chat.pk) and view["message_count"] == 3


def test_a_message_read_for_the_sockets_reads_files_only_for_a_message_that_has_some(
    ref: SessionRef, user: Any, chat: Conversation, django_assert_num_queries: Any
) -> None:
    scope = authorize_session(ref, impersonated=False)
    plain = append_message(chat.pk, role=Message.Role.USER, content="no files")
    with_file = append_message(chat.pk, role=Message.Role.USER, content="one file")
    Attachment.objects.create(
        user=user, conversation=chat, message=with_file, name="a.txt", content_type="text/plain", size=3, file="a.txt"
    )
    with django_assert_num_queries(1):  # the message, and whether it has files, in one statement
        assert message_view(scope, chat.pk, plain.pk)["files"] == []
    with django_assert_num_queries(2):
        assert [f["name"] for f in message_view(scope, chat.pk, with_file.pk)["files"]] == ["a.txt"]
