"""Streamed answers: drafts on the chat's group while the model writes; on a stop or the
deadline, what was streamed is kept as a partial answer.

The model is the scripted server speaking server-sent events to the real
``openai`` client; turns run in a real Celery worker; the chat's group is
heard through the test's Redis channel layer.
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pytest

from agent import turns
from agent.access import SessionRef
from agent.ai import AIError, complete
from agent.ai.providers import StreamAssembly
from agent.ai.streaming import _lines
from agent.core import events
from agent.models import AIRequest, Turn
from agent.turns import stream
from tests.support.clock import ManualClock
from tests.support.layer import Listener
from tests.support.model_server import ScriptedModelServer, answer, error, tool_calls
from tests.support.turns import WORDS, agent_conf, messages_of, wait_ended

pytestmark = pytest.mark.django_db(transaction=True)


def chunk(**delta: Any) -> dict[str, Any]:
    return {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def finish(reason: str = "stop") -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def heard(listener: Listener, until: str = "ended", timeout: float = 15) -> list[tuple[float, dict[str, Any]]]:
    """The chat's events with the time each arrived, up to the turn's end."""
    got: list[tuple[float, dict[str, Any]]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = listener.receive(timeout=deadline - time.monotonic())
        if event is None:
            break
        got.append((time.monotonic(), event))
        if event["type"] == events.TURN_CHANGED and event["status"] == until:
            break
    return got


def stream_call(endpoint: Any, user: Any, seen: list[str], **kwargs: Any) -> Any:
    messages = [{"role": "user", "content": "hello"}]
    return complete(endpoint, messages, user=user, source="agent", task="agent.chat", on_chunk=seen.append, **kwargs)


# -- assembly -------------------------------------------------------------------------------


def test_assembly_joins_text_and_builds_each_tool_call_from_its_pieces_by_index():
    assembly = StreamAssembly()
    for piece in [
        chunk(role="assistant", content="Let me "),
        chunk(content="look."),
        chunk(tool_calls=[{"index": 0, "id": "a", "function": {"name": "notes_search", "arguments": '{"qu'}}]),
        chunk(tool_calls=[{"index": 1, "id": "b", "function": {"name": "notes_read", "arguments": ""}}]),
        chunk(tool_calls=[{"index": 0, "function": {"arguments": 'ery": "milk"}'}}]),
        chunk(tool_calls=[{"index": 1, "function": {"name": "notes_read", "arguments": '{"id": 1}'}}]),
        finish("tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}},
    ]:
        assembly.add(piece)
    assert assembly.text == "Let me look." and assembly.finished and assembly.model == "m"
    assert [(c.id, c.name, c.arguments) for c in assembly.tool_calls()] == [
        ("a", "notes_search", '{"query": "milk"}'),
        ("b", "notes_read", '{"id": 1}'),
    ]
    assert assembly.usage == {"prompt_tokens": 7, "completion_tokens": 3}


def test_assembly_is_not_finished_before_a_finish_reason_and_refuses_shapes_no_server_sends():
    assembly = StreamAssembly()
    assembly.add(chunk(content="half an answer"))
    assert not assembly.finished
    for bad in [chunk(content=["not", "text"]), {"choices": "nope"}, chunk(tool_calls=[{"index": "x"}])]:
        with pytest.raises(AIError) as refused:
            StreamAssembly().add(bad)
        assert refused.value.code == "invalid_response"


# -- drafts ------------------------------------------------------------------------------------


class Shown:
    """A follower of a draft that notes each text the draft sends, with the draft's time then."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.sent: list[tuple[float, str]] = []

    def show(self, text: str) -> None:
        self.sent.append((self.clock.now(), text))

    def close(self) -> None:
        pass


def test_a_draft_sends_the_first_text_at_once_and_the_rest_at_most_once_per_interval(
    chat: Any, capture_events: list[tuple[str, dict[str, Any]]]
) -> None:
    clock = ManualClock()
    shown = Shown(clock)
    draft = stream.Draft(chat.pk, "turn-1", 1, check=lambda: None, followers=[shown], clock=clock)
    for n in range(1, 51):  # a chunk every 10 ms for half a second
        draft(WORDS[: n * 5])
        clock.advance(0.01)
    clock.advance(draft.interval)
    times, texts = zip(*shown.sent, strict=True)
    assert (times[0], texts[0]) == (0, WORDS[:5])  # the first at once
    assert texts[-1] == WORDS[:250]  # the last when its interval ended
    assert all(later - earlier >= draft.interval - 1e-9 for earlier, later in zip(times, times[1:], strict=False))
    assert len(texts) == round(0.5 / draft.interval) + 1  # once an interval, no more
    deltas = [event["text"] for group, event in capture_events if event["type"] == events.ANSWER_DELTA]
    assert deltas == list(texts)  # the chat's tabs get what the followers get
    assert {group for group, _event in capture_events} == {events.topic(chat.pk)}


def test_a_closed_draft_sends_nothing_more_not_even_what_waited_for_its_interval(chat: Any) -> None:
    clock = ManualClock()
    shown = Shown(clock)
    draft = stream.Draft(chat.pk, "turn-1", 1, check=lambda: None, followers=[shown], clock=clock)
    draft("Hello")
    draft("Hello, world")  # due when the interval ends
    draft.close()
    draft("Hello, world!")
    clock.advance(1)
    assert [text for _at, text in shown.sent] == ["Hello"]


def test_a_draft_checks_the_turn_between_chunks_at_most_every_half_second() -> None:
    clock = ManualClock()
    checks: list[float] = []
    draft = stream.Draft("chat", "turn", 1, check=lambda: checks.append(clock.now()), clock=clock)
    draft.close()  # nothing is sent: only the checks are counted
    while clock.now() < 1.2:
        draft("text")
        clock.advance(0.01)
    assert len(checks) == 2  # at 0.5 s and 1 s, none at the first chunk
    assert checks[0] >= stream.CHECK_EVERY_S
    assert checks[1] - checks[0] >= stream.CHECK_EVERY_S


# -- complete() with a stream -------------------------------------------------------------------


def test_a_streamed_call_reports_the_text_so_far_and_journals_the_usage_of_its_last_chunk(
    endpoint: Any, model_server: ScriptedModelServer, user: Any
) -> None:
    model_server.push(answer("one two three", usage={"prompt_tokens": 40, "completion_tokens": 3, "cost": 0.25}))
    seen: list[str] = []
    completion = stream_call(endpoint, user, seen)
    body = model_server.requests[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert completion.content == "one two three"
    assert [s for s in seen if s] == ["one", "one two", "one two three", "one two three", "one two three"]
    row = AIRequest.objects.get()
    assert (row.status, row.input_tokens, row.output_tokens, str(row.cost_usd)) == ("success", 40, 3, "0.25000000")
    assert completion.request_id == row.pk


def test_streamed_calls_read_each_body_to_its_end_and_share_one_connection(
    endpoint: Any, model_server: ScriptedModelServer, user: Any
) -> None:
    model_server.push(answer("one"), answer("two"), answer("three"))
    assert [stream_call(endpoint, user, []).content for _ in range(3)] == ["one", "two", "three"]
    assert model_server.connections == 1


def test_line_separators_inside_an_event_are_text_not_line_breaks(
    endpoint: Any, model_server: ScriptedModelServer, user: Any
) -> None:
    text = "one\u2028two\u2029three\x85four — ünïcode"
    model_server.push(answer("", chunks=[text[:5], text[5:]]))
    assert stream_call(endpoint, user, []).content == text


def test_events_split_only_at_cr_lf_and_crlf_even_across_reads() -> None:
    pieces = [b"data: a\r", b"\n\r\ndata: b\xe2\x80\xa8c\n", b"\ndata: d\re", b"vent: x\n"]
    assert list(_lines(pieces)) == ["data: a", "", "data: b\u2028c", "", "data: d", "event: x"]


def test_a_server_slow_to_end_its_body_after_done_still_gives_the_answer(
    endpoint: Any, model_server: ScriptedModelServer, user: Any
) -> None:
    endpoint.timeout_s = 1
    model_server.push(answer("all said", linger=2))
    assert stream_call(endpoint, user, []).content == "all said"
    assert AIRequest.objects.get().status == "success"


def test_streamed_tool_calls_are_whole_when_the_call_returns(
    endpoint: Any, model_server: ScriptedModelServer, user: Any
) -> None:
    model_server.push(tool_calls(("notes_search", {"query": "milk and eggs"}, "call_1"), ("notes_read", {"id": 4})))
    completion = stream_call(endpoint, user, [])
    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls][0] == (
        "call_1",
        "notes_search",
        '{"query": "milk and eggs"}',
    )
    assert completion.tool_calls[1].arguments == '{"id": 4}'


@pytest.mark.parametrize("cut", ["broken_off", "no_finish"])
def test_a_stream_cut_off_midway_is_invalid_response_with_its_journal_row(
    endpoint: Any, model_server: ScriptedModelServer, user: Any, cut: str
) -> None:
    if cut == "broken_off":
        model_server.push(answer("never finished", cut=True))
    else:  # the body ends cleanly, but no chunk ever said the answer was done
        model_server.push(answer("never finished", unfinished=True))
    with pytest.raises(AIError) as failed:
        stream_call(endpoint, user, [])
    assert failed.value.code == "invalid_response"
    row = AIRequest.objects.get()
    assert (row.status, row.error_code, failed.value.request_id) == ("error", "invalid_response", row.pk)


def test_what_on_chunk_raises_ends_the_call_journalled_as_interrupted(
    endpoint: Any, model_server: ScriptedModelServer, user: Any
) -> None:
    model_server.push(answer(WORDS, chunk_delay=0.01))

    def stop_at_three(text: str) -> None:
        if text.count("word") >= 3:
            raise LookupError("the caller's own reason")

    with pytest.raises(LookupError, match="the caller's own reason"):
        complete(endpoint, [], user=user, source="agent", task="agent.chat", on_chunk=stop_at_three)
    row = AIRequest.objects.get()
    assert (row.status, row.error_code) == ("error", "interrupted")
    # its usage never came: the request's text and the words read are counted at four characters a token
    assert (row.input_tokens, row.output_tokens) == (0, len("word0 word1 word2") // 4)
    assert row.cost_usd == Decimal(4 * 8) / Decimal(1_000_000)


def test_a_stream_cut_off_is_journalled_with_what_it_cost_so_far(
    endpoint: Any, model_server: ScriptedModelServer, user: Any
) -> None:
    model_server.push(answer(WORDS, cut=True))
    asked = [{"role": "user", "content": "x" * 4000}]
    with pytest.raises(AIError):
        complete(endpoint, asked, user=user, source="agent", task="agent.chat", on_chunk=lambda text: None)
    row = AIRequest.objects.get()
    assert (row.error_code, row.input_tokens, row.output_tokens) == ("invalid_response", 1000, len(WORDS) // 4)


def test_an_endpoint_that_cannot_stream_is_called_as_before(
    endpoint: Any, model_server: ScriptedModelServer, user: Any
) -> None:
    endpoint.supports_streaming = False
    model_server.push(answer("all at once"))
    seen: list[str] = []
    assert stream_call(endpoint, user, seen).content == "all at once"
    assert seen == [] and "stream" not in model_server.requests[-1]


def test_a_server_that_ignores_stream_and_answers_whole_is_read_whole(
    endpoint: Any, model_server: ScriptedModelServer, user: Any
) -> None:
    whole = model_server.completion(answer("whole anyway"), {"model": "scripted-model"})
    model_server.push(answer("", raw=whole))
    assert stream_call(endpoint, user, []).content == "whole anyway"


# -- turns ------------------------------------------------------------------------------------------


def test_the_answer_reaches_the_chat_as_drafts_before_it_is_stored_at_most_one_per_interval(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    listener = Listener()
    listener.join(events.topic(chat.pk))
    model_server.push(answer(WORDS, chunk_delay=0.01))
    turn = turns.start(ref, chat.pk, "talk to me", impersonated=False)
    got = heard(listener)
    assert wait_ended(turn).status == Turn.Status.FINISHED
    drafts = [(at, e) for at, e in got if e["type"] == events.ANSWER_DELTA]
    stored = next(at for at, e in got if e["type"] == events.MESSAGE_ADDED and e["message"] == str(answer_of(chat)))
    assert len(drafts) >= 3 and all(at < stored for at, _e in drafts)
    assert all(WORDS.startswith(e["text"]) and (e["turn"], e["round"]) == (str(turn.pk), 1) for _at, e in drafts)
    assert [len(e["text"]) for _at, e in drafts] == sorted({len(e["text"]) for _at, e in drafts})  # only growing
    streamed_s = model_server.chunk_times[-1] - model_server.chunk_times[0]
    assert len(drafts) <= streamed_s / 0.1 + 2  # one per STREAM_INTERVAL_MS, the first and the last of a burst
    assert messages_of(chat)[-1].content == WORDS


def answer_of(chat: Any) -> Any:
    return [m for m in messages_of(chat) if m.role == "assistant"][-1].pk


def test_stop_halts_the_stream_within_a_second_and_keeps_what_was_streamed_as_a_partial_answer(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    listener = Listener()
    listener.join(events.topic(chat.pk))
    model_server.push(answer(WORDS, chunk_delay=0.2))  # eight seconds of answer
    turn = turns.start(ref, chat.pk, "talk slowly", impersonated=False)
    first_draft = None
    while first_draft is None:
        event = listener.receive(timeout=5)
        assert event is not None, "no draft came"
        first_draft = event if event["type"] == events.ANSWER_DELTA else None
    asked = time.monotonic()
    assert turns.stop(ref, chat.pk, impersonated=False)
    rest = heard(listener)
    ended_at = next(at for at, e in rest if e["type"] == events.TURN_CHANGED and e["status"] == "ended")
    assert ended_at - asked < 1.0 + 0.5  # within a second, and the stopped notice's store
    turn = wait_ended(turn)
    assert (turn.status, [(m.role, m.notice_code, m.partial) for m in messages_of(chat)]) == (
        Turn.Status.STOPPED,
        [("user", "", False), ("assistant", "", True), ("notice", "stopped", False)],
    )
    row = AIRequest.objects.get()
    assert row.error_code == "interrupted"
    assert len(model_server.chunk_times) < len(WORDS.split())
    kept = messages_of(chat)[1]
    assert kept.content and WORDS.startswith(kept.content) and first_draft["text"] in kept.content
    # the call's journal row (its estimate: no usage came) is the partial answer's, as for any answer
    assert (kept.ai_request_id, kept.output_tokens, kept.cost_usd) == (row.pk, row.output_tokens, row.cost_usd)
    assert row.attribution["message"] == str(kept.pk)


def test_a_stream_cut_off_in_a_turn_tells_the_chat_invalid_response_with_the_journal_row(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(answer("a start and then", cut=True))
    turn = wait_ended(turns.start(ref, chat.pk, "hello", impersonated=False))
    notice = messages_of(chat)[-1]
    row = AIRequest.objects.get()
    assert (turn.status, turn.end_reason) == ("failed", "model_failed")
    assert (notice.notice_code, notice.notice_params, notice.ai_request_id) == (
        "model_failed",
        {"code": "invalid_response"},
        row.pk,
    )
    assert [m.role for m in messages_of(chat)] == ["user", "notice"]  # nothing of the cut answer


def test_a_turn_on_an_endpoint_that_cannot_stream_sends_no_draft(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    endpoint.supports_streaming = False
    endpoint.save()
    listener = Listener()
    listener.join(events.topic(chat.pk))
    model_server.push(answer(WORDS))
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    got = heard(listener)
    assert wait_ended(turn).status == Turn.Status.FINISHED
    assert not [e for _at, e in got if e["type"] == events.ANSWER_DELTA]
    assert messages_of(chat)[-1].content == WORDS


def test_a_marker_the_model_begins_at_the_end_never_shows_in_a_draft(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    listener = Listener()
    listener.join(events.topic(chat.pk))
    pieces = ["Sorry,", " I only help", " with notes.", " ⟦off", "_purpose:", " poem ", "request⟧"]
    with agent_conf(STREAM_INTERVAL_MS=1):
        model_server.push(answer("", chunks=pieces, chunk_delay=0.05))
        turn = turns.start(ref, chat.pk, "write me a poem", impersonated=False)
        got = heard(listener)
    assert wait_ended(turn).status == Turn.Status.FINISHED
    drafts = [e["text"] for _at, e in got if e["type"] == events.ANSWER_DELTA]
    assert drafts[-1] == "Sorry, I only help with notes." and not any("⟦" in text for text in drafts)
    assert messages_of(chat)[-1].content == "Sorry, I only help with notes."


def test_a_failed_call_before_any_chunk_sends_no_draft(
    worker: Any, ref: SessionRef, chat: Any, endpoint: Any, model_server: ScriptedModelServer
) -> None:
    listener = Listener()
    listener.join(events.topic(chat.pk))
    model_server.push(error(401))
    turn = turns.start(ref, chat.pk, "hello", impersonated=False)
    got = heard(listener)
    assert wait_ended(turn).end_reason == "model_failed"
    assert not [e for _at, e in got if e["type"] == events.ANSWER_DELTA]


def test_a_call_halted_by_its_watchdog_leaves_no_broken_connection_in_the_pool(
    endpoint: Any, user: Any, model_server: ScriptedModelServer
) -> None:
    endpoint.timeout_s = 30
    endpoint.save()
    model_server.push(answer(WORDS, pauses={2: 8.0}), answer("after"))  # silent for eight seconds

    def watch() -> None:
        if len(model_server.chunk_times) > 2:
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        stream_call(endpoint, user, [], watch=watch)
    seen: list[str] = []
    assert stream_call(endpoint, user, seen).content == "after"
