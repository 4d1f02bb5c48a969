"""What a turn shows the model of the chat so far."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from django.utils import translation

from agent.conversations import append_message
from agent.models import Confirmation, Message
from agent.turns.history import build, confirmation_phrase, load, user_content
from tests.support.turns import messages_of

CURRENT = {"role": "user", "content": "now"}


def user(text: str) -> Message:
    return Message(role="user", content=text)


def reply(text: str, **fields: Any) -> Message:
    return Message(role="assistant", content=text, **fields)


def proposal(tool: str, confirmation_id: Any) -> Message:
    return Message(
        role="tool",
        tool_name=tool,
        tool_outcome="needs_confirmation",
        confirmation_id=confirmation_id,
        tool_result={"status": "confirmation_required", "confirmation_id": str(confirmation_id)},
    )


def outcome(status: str, tool: str, confirmation_id: Any) -> Message:
    return Message(
        role="notice",
        notice_code=f"confirmation_{status}",
        notice_params={"tool": tool},
        confirmation_id=confirmation_id,
    )


def contents(entries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["role"], e["content"]) for e in entries]


@dataclass
class File:
    name: str
    is_picture: bool = False
    text: str = ""
    text_complete: bool = True


# -- build ---------------------------------------------------------------------------


def test_build_keeps_user_messages_and_final_answers_and_leaves_out_tools_and_notices() -> None:
    messages = [
        user("q1"),
        reply("let me look", tool_calls=[{"id": "c1", "name": "notes_search", "arguments": "{}"}]),
        Message(role="tool", tool_name="notes_search", tool_outcome="ok", tool_result={"notes": ["SECRET"]}),
        reply("a1"),
        Message(role="notice", notice_code="model_failed", notice_params={"code": "rate_limited"}),
        Message(role="notice", notice_code="stopped"),
        user("q2"),
        Message(role="tool", tool_name="notes_read", tool_outcome="denied", tool_result={"error": "denied"}),
    ]
    entries = build(messages, [], CURRENT, 10_000)
    assert contents(entries) == [("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("user", "now")]


def test_a_window_exactly_at_the_limit_is_kept_whole() -> None:
    messages = [user("a" * 10), reply("b" * 10)]
    assert len(build(messages, [], CURRENT, 23)) == 3  # 10 + 10 + len("now")


def test_one_character_over_the_limit_ends_the_window() -> None:
    messages = [user("a" * 10), reply("b" * 10)]
    assert contents(build(messages, [], CURRENT, 22)) == [("assistant", "b" * 10), ("user", "now")]


def test_the_first_entry_that_does_not_fit_ends_the_window() -> None:
    messages = [user("small"), reply("x" * 50), user("fits")]
    assert contents(build(messages, [], CURRENT, 20)) == [("user", "fits"), ("user", "now")]


def test_current_is_always_kept_even_over_the_limit() -> None:
    big = {"role": "user", "content": "n" * 100}
    assert build([user("old")], [], big, 10) == [big]


def test_a_decided_card_reads_as_its_outcome_at_the_notices_place() -> None:
    cid = uuid.uuid4()
    messages = [
        user("make a note"),
        proposal("notes_create", cid),
        reply("later text"),
        outcome("done", "notes_create", cid),
    ]
    assert contents(build(messages, [], CURRENT, 10_000)) == [
        ("user", "make a note"),
        ("assistant", "later text"),
        ("user", "[confirmation] done: notes_create"),
        ("user", "now"),
    ]


def test_a_card_without_an_outcome_reads_as_waiting_at_its_place() -> None:
    cid = uuid.uuid4()
    messages = [user("make a note"), proposal("notes_create", cid), user("and?")]
    assert contents(build(messages, [], CURRENT, 10_000)) == [
        ("user", "make a note"),
        ("user", "[confirmation] waiting: notes_create"),
        ("user", "and?"),
        ("user", "now"),
    ]


def test_an_outcome_never_carries_what_the_tool_returned_or_a_person_wrote() -> None:
    cid = uuid.uuid4()
    notice = outcome("failed", "notes_create", cid)
    notice.content = "IntegrityError: duplicate key SECRET"
    entries = build([proposal("notes_create", cid), notice], [], CURRENT, 10_000)
    assert "SECRET" not in repr(entries) and entries[0]["content"] == "[confirmation] failed: notes_create"


@pytest.mark.django_db
def test_the_outcomes_tool_name_is_the_cards(ref: Any, chat: Any) -> None:
    row = Confirmation.objects.create(
        user_id=ref.user_id,
        conversation=chat,
        tool_name="notes_update",
        call_id="c",
        fingerprint="f",
        expires_at="2100-01-01T00:00:00Z",
    )
    notice = Message(role="notice", notice_code="confirmation_cancelled", confirmation=row)
    assert contents(build([notice], [], CURRENT, 10_000))[0] == ("user", "[confirmation] cancelled: notes_update")


@pytest.mark.parametrize(
    "status, phrase",
    [
        ("done", "[confirmation] done: notes_create"),
        ("cancelled", "[confirmation] cancelled: notes_create"),
        ("expired", "[confirmation] expired: notes_create"),
        ("stale", "[confirmation] the data changed: notes_create"),
        ("failed", "[confirmation] failed: notes_create"),
        ("waiting", "[confirmation] waiting: notes_create"),
    ],
)
def test_confirmation_phrases_in_english(status: str, phrase: str) -> None:
    with translation.override("en"):
        assert confirmation_phrase("notes_create", status) == phrase


@pytest.mark.parametrize(
    "status, phrase",
    [
        ("done", "[подтверждение] выполнено: notes_create"),
        ("cancelled", "[подтверждение] отменено: notes_create"),
        ("expired", "[подтверждение] срок истёк: notes_create"),
        ("stale", "[подтверждение] данные изменились: notes_create"),
        ("failed", "[подтверждение] не удалось: notes_create"),
        ("waiting", "[подтверждение] ожидает: notes_create"),
    ],
)
def test_confirmation_phrases_in_russian(status: str, phrase: str) -> None:
    with translation.override("ru"):
        assert confirmation_phrase("notes_create", status) == phrase


@pytest.mark.parametrize(
    "tool, status",
    [
        ("notes_create", "ok"),
        ("notes_create", "needs_confirmation"),
        ("notes_create", ""),
        ("notes_create", "DONE"),
        ("", "done"),
        (None, "done"),
        (42, "done"),
    ],
)
def test_confirmation_phrase_is_none_for_anything_else(tool: Any, status: str) -> None:
    assert confirmation_phrase(tool, status) is None


# -- user_content ------------------------------------------------------------------------


def test_user_content_without_attachments_is_the_text() -> None:
    assert user_content("just text", [], 100) == "just text"


def test_text_attachments_share_the_limit_and_a_cut_one_says_how_much_was_left_out() -> None:
    files = [File("a.txt", text="A" * 80), File("b.txt", text="B" * 30)]
    content = user_content("see files", files, 100)  # a share of 50 each
    assert content.startswith("see files")
    assert "A" * 50 in content and "A" * 51 not in content
    assert "B" * 30 in content
    assert "[only part of a.txt is shown: 30 characters were left out]" in content
    assert "only part of b.txt" not in content


def test_a_text_cut_by_extraction_says_so_even_within_its_share() -> None:
    content = user_content("see", [File("big.pdf", text="T" * 10, text_complete=False)], 100)
    assert "T" * 10 in content and "only part of big.pdf is shown" in content
    assert "0 characters were left out" not in content


def test_a_picture_is_a_line_that_names_it_and_takes_no_share() -> None:
    files = [File("cat.png", is_picture=True), File("a.txt", text="A" * 100)]
    content = user_content("look", files, 100)
    assert "[picture: cat.png]" in content
    assert "A" * 100 in content and "only part" not in content  # the one text file has the whole limit


def test_build_puts_a_messages_attachments_into_it() -> None:
    first = user("with a file")
    attached = File("notes.txt", text="file body")
    attached.message_id = first.pk  # type: ignore[attr-defined]
    entries = build([first], [attached], CURRENT, 10_000)
    assert "file body" in entries[0]["content"] and "notes.txt" in entries[0]["content"]


# -- load ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_load_reads_the_chat_like_build(ref: Any, chat: Any) -> None:
    cid = uuid.uuid4()
    confirmation = Confirmation.objects.create(
        id=cid,
        user_id=ref.user_id,
        conversation=chat,
        tool_name="notes_create",
        call_id="c",
        fingerprint="f",
        expires_at="2100-01-01T00:00:00Z",
    )
    append_message(chat.pk, role="user", content="q1")
    append_message(chat.pk, role="assistant", content="", tool_calls=[{"id": "c", "name": "notes_create"}])
    append_message(
        chat.pk,
        role="tool",
        tool_name="notes_create",
        tool_outcome="needs_confirmation",
        confirmation=confirmation,
        tool_result={"status": "confirmation_required"},
    )
    append_message(
        chat.pk,
        role="notice",
        notice_code="confirmation_done",
        notice_params={"tool": "notes_create"},
        confirmation=confirmation,
    )
    append_message(chat.pk, role="assistant", content="a1")
    assert load(chat.pk, CURRENT, 10_000) == build(messages_of(chat), [], CURRENT, 10_000)


@pytest.mark.django_db
def test_load_reads_in_pages_and_stops_at_the_windows_end(
    ref: Any, chat: Any, django_assert_max_num_queries: Any
) -> None:
    # given: a chat of 1,200 messages of 10 characters each
    Message.objects.bulk_create(
        Message(conversation=chat, seq=i, role="user" if i % 2 else "assistant", content=f"{i:010d}")
        for i in range(1, 1201)
    )
    # when the window holds 30 of them, one page is read
    with django_assert_max_num_queries(1):
        entries = load(chat.pk, CURRENT, 303)
    assert len(entries) == 31 and entries[0]["content"] == f"{1171:010d}"
    # and when it holds 300, two pages, never the whole chat
    with django_assert_max_num_queries(2):
        assert len(load(chat.pk, CURRENT, 3003)) == 301


@pytest.mark.django_db
def test_load_before_a_message_reads_only_what_came_before(ref: Any, chat: Any) -> None:
    rows = [append_message(chat.pk, role="user", content=f"m{i}") for i in range(3)]
    assert contents(load(chat.pk, CURRENT, 1000, before_seq=rows[2].seq))[:-1] == [("user", "m0"), ("user", "m1")]
