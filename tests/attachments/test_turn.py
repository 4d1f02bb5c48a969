"""A turn with the user's files: linked to the message that sends them, read by the model in that turn
(text in its share, pictures as image parts), and pictures never sent to a model that cannot see them
."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models.signals import post_save
from django.utils import timezone

from agent import turns
from agent.core.errors import NotFound
from agent.models import AIRequest, Attachment, Lock, Message, Turn
from agent.tasks import run_turn
from agent.turns import locks
from tests.support.files import picture_bytes, read_file
from tests.support.model_server import answer, error

pytestmark = pytest.mark.django_db(transaction=True)


def user_entry(request: dict[str, Any]) -> Any:
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


def test_a_turn_links_its_files_and_the_model_reads_the_text_and_sees_the_picture(ref, chat, endpoint, model_server):
    endpoint.supports_images = True
    endpoint.save()
    notes = read_file(ref, chat, "notes.txt", b"Milk is on the shopping list.\nAnd bread.")
    photo = read_file(ref, chat, "fridge.png", picture_bytes())
    model_server.push(answer("You need milk; the picture shows a red square."))
    turn = turns.start(ref, chat.pk, "what do I need?", attachment_ids=[notes.pk, photo.pk], impersonated=False)
    run_turn(str(turn.pk))
    message = Message.objects.get(conversation=chat, role=Message.Role.USER)
    assert set(Attachment.objects.filter(message=message).values_list("pk", flat=True)) == {notes.pk, photo.pk}
    text_part, image_part = user_entry(model_server.requests[0])
    assert "what do I need?" in text_part["text"] and "Milk is on the shopping list." in text_part["text"]
    assert "fridge.png" in text_part["text"]
    assert image_part["image_url"]["url"].startswith("data:image/png;base64,")
    assert AIRequest.objects.get().captured is None  # a turn with pictures is never captured


def test_the_pictures_go_only_with_their_own_turn(ref, chat, endpoint, model_server):
    endpoint.supports_images = True
    endpoint.save()
    photo = read_file(ref, chat, "fridge.png", picture_bytes())
    model_server.push(answer("a red square"), answer("hello again"))
    run_turn(str(turns.start(ref, chat.pk, "look", attachment_ids=[photo.pk], impersonated=False).pk))
    run_turn(str(turns.start(ref, chat.pk, "and now?", impersonated=False).pk))
    later = model_server.requests[1]["messages"]
    assert all(isinstance(m["content"], str) for m in later if m["role"] == "user")
    assert any("fridge.png" in m["content"] for m in later if m["role"] == "user")  # the line that names it stays


def test_a_model_that_cannot_see_pictures_is_not_called_and_the_files_go_back(ref, chat, endpoint, model_server):
    photo = read_file(ref, chat, "fridge.png", picture_bytes())
    turn = turns.start(ref, chat.pk, "look", attachment_ids=[photo.pk], impersonated=False)
    run_turn(str(turn.pk))
    assert model_server.requests == []
    codes = [(m.role, m.notice_code) for m in Message.objects.filter(conversation=chat).order_by("seq")]
    assert codes == [("user", ""), ("notice", "pictures_not_seen")]
    photo.refresh_from_db()
    assert photo.message_id is None  # back in the composer


def test_a_provider_that_refuses_the_pictures_is_asked_again_without_them(ref, chat, endpoint, model_server):
    endpoint.supports_images = True
    endpoint.save()
    photo = read_file(ref, chat, "fridge.png", picture_bytes())
    model_server.push(error(400), answer("I could not see the picture."))
    run_turn(str(turns.start(ref, chat.pk, "look", attachment_ids=[photo.pk], impersonated=False).pk))
    first, second = model_server.requests
    assert isinstance(user_entry(first), list) and isinstance(user_entry(second), str)
    shape = [(m.role, m.notice_code) for m in Message.objects.filter(conversation=chat).order_by("seq")]
    assert shape == [("user", ""), ("notice", "pictures_not_seen"), ("assistant", "")]


def test_start_takes_only_ready_unlinked_files_of_this_chat_and_user(ref, chat, endpoint, settings):
    notes = read_file(ref, chat, "notes.txt", b"text")
    Attachment.objects.filter(pk=notes.pk).update(status=Attachment.Status.PENDING)
    with pytest.raises(NotFound):
        turns.start(ref, chat.pk, "read it", attachment_ids=[notes.pk], impersonated=False)
    with pytest.raises(NotFound):
        turns.start(ref, chat.pk, "read it", attachment_ids=["not-an-id"], impersonated=False)
    settings.AGENT = {**settings.AGENT, "MAX_FILES_PER_MESSAGE": 1}
    with pytest.raises(ValidationError):
        turns.start(ref, chat.pk, "read it", attachment_ids=[notes.pk, notes.pk], impersonated=False)


def test_pictures_the_provider_refused_are_taken_off_the_message_and_gone_from_later_history(
    ref, chat, endpoint, model_server
):
    # given: a provider that refuses the request with a picture
    endpoint.supports_images = True
    endpoint.save()
    notes = read_file(ref, chat, "notes.txt", b"Milk is on the shopping list.")
    photo = read_file(ref, chat, "fridge.png", picture_bytes())
    model_server.push(error(400), answer("I could not see the picture."), answer("hello again"))
    # when: the turn is asked again without it, and the user asks on
    run_turn(str(turns.start(ref, chat.pk, "look", attachment_ids=[notes.pk, photo.pk], impersonated=False).pk))
    run_turn(str(turns.start(ref, chat.pk, "and now?", impersonated=False).pk))
    # then: as the notice says, the picture went back to the composer; the text file stays, as the model read it
    photo.refresh_from_db()
    notes.refresh_from_db()
    assert photo.message_id is None and notes.message_id is not None
    _refused, retried, later = model_server.requests
    assert "fridge.png" not in user_entry(retried) and "Milk is on the shopping list." in user_entry(retried)
    earlier = [m["content"] for m in later["messages"] if m["role"] == "user"][:-1]
    assert len(earlier) == 1 and "fridge.png" not in earlier[0] and "notes.txt" in earlier[0]


def test_a_picture_whose_file_is_gone_is_told_to_the_model_in_words_and_the_turn_goes_on(
    ref, chat, endpoint, model_server
):
    # given: a picture whose stored file has gone from the storage since it was read
    endpoint.supports_images = True
    endpoint.save()
    photo = read_file(ref, chat, "fridge.png", picture_bytes())
    kept = read_file(ref, chat, "door.png", picture_bytes())
    photo.file.storage.delete(photo.file.name)
    model_server.push(answer("I see one picture."))
    # when: the turn sends both
    turn = turns.start(ref, chat.pk, "look", attachment_ids=[photo.pk, kept.pk], impersonated=False)
    run_turn(str(turn.pk))
    # then: the model reads that the file could not be read, sees the other, and answers
    parts = user_entry(model_server.requests[0])
    assert [p["type"] for p in parts] == ["text", "text", "image_url"]
    assert "fridge.png" in parts[1]["text"] and "could not be read" in parts[1]["text"]
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.FINISHED
    assert [(m.role, m.content) for m in Message.objects.filter(conversation=chat).order_by("seq")][1:] == [
        ("assistant", "I see one picture.")
    ]


def test_a_turn_that_lost_its_chat_takes_no_file_off_its_message(ref, chat, endpoint, model_server):
    # given: a model that cannot see pictures, and a newer turn that takes the chat once the message is stored
    photo = read_file(ref, chat, "fridge.png", picture_bytes())
    turn = turns.start(ref, chat.pk, "look", attachment_ids=[photo.pk], impersonated=False)

    def take_the_chat() -> None:
        Lock.objects.filter(name=locks.chat_lock(chat.pk)).update(expires_at=timezone.now() - timedelta(seconds=1))
        assert locks.take(locks.chat_lock(chat.pk), uuid.uuid4())

    def on_the_users_message(sender: Any, instance: Message, created: bool = False, **kwargs: Any) -> None:
        if created and instance.role == Message.Role.USER:
            transaction.on_commit(take_the_chat)

    post_save.connect(on_the_users_message, sender=Message, weak=False)
    try:
        run_turn(str(turn.pk))
    finally:
        post_save.disconnect(on_the_users_message, sender=Message)
    # then: the old turn wrote nothing more: the picture stays on its message, no pictures_not_seen notice
    photo.refresh_from_db()
    assert photo.message_id is not None
    codes = [(m.role, m.notice_code) for m in Message.objects.filter(conversation=chat).order_by("seq")]
    assert codes == [("user", ""), ("notice", "lock_lost")]
    assert Turn.objects.get(pk=turn.pk).end_reason == "lock_lost"
