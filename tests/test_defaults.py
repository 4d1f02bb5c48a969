"""The documented defaults of every setting, and the beat schedule a site imports."""

import pytest
from django.test import override_settings

from agent.core.conf import agent_settings

DOCUMENTED_DEFAULTS = {
    "HISTORY_CHARS": 32_000,
    "TOOL_RESULT_CHARS": 8_000,
    "MAX_TOOL_ROUNDS": 8,
    "MAX_TOOL_CALLS_PER_ROUND": 10,
    "TURN_DEADLINE_S": 180,
    "STOP_GRACE_S": 10,
    "LOCK_LEASE_S": 30,
    "LOCK_RENEW_S": 10,
    "CONFIRMATION_TTL_S": 900,
    "MAX_TURNS_PER_USER": 3,
    "MAX_FILES_PER_MESSAGE": 5,
    "MAX_FILE_BYTES": 20 * 1024 * 1024,
    "OFF_PURPOSE_LIMIT": 3,
    "CHATS_PAGE": 20,
    "CHATS_PAGE_MAX": 50,
    "MESSAGES_PAGE": 50,
    "MESSAGES_PAGE_MAX": 200,
    "AUTO_TITLE_CHARS": 60,
    "MAX_TITLE_CHARS": 200,
    "MAX_INSTRUCTIONS_CHARS": 4_000,
    "SOCKET_RECHECK_S": 30,
    "STREAM_INTERVAL_MS": 100,
    "EVENTS_KEEPALIVE_S": 15,
    "EXTRACTION_TIMEOUT_S": 30,
    "PICTURE_MAX_PX": 1568,
    "MAX_STREAMS_PER_USER": 20,
    "MAX_TOOL_ARGUMENT_DEPTH": 32,
    "RETENTION_DAYS": None,
    "PURGE_DELETED_DAYS": 30,
    "TOOLS_INLINE_MAX": 20,
    "TOOLS_INLINE_BYTES": 16_000,
    "TOOLS_RANK_CHARS": 2_000,
    "TOOL_RANKER": None,
}


@pytest.mark.parametrize(("name", "default"), DOCUMENTED_DEFAULTS.items(), ids=list(DOCUMENTED_DEFAULTS))
def test_each_setting_defaults_to_what_the_spec_names(name, default):
    with override_settings(AGENT={}):
        assert getattr(agent_settings, name) == default


def test_a_site_overrides_one_setting_and_keeps_the_others():
    with override_settings(AGENT={"MAX_TOOL_ROUNDS": 3}):
        assert (agent_settings.MAX_TOOL_ROUNDS, agent_settings.HISTORY_CHARS) == (3, 32_000)


def test_the_quotas_and_the_body_limit_have_their_defaults():
    with override_settings(AGENT={}):
        assert agent_settings.MAX_STORED_BYTES_PER_USER == 500 * 1024 * 1024
        assert (agent_settings.NEW_CHATS_PER_MINUTE, agent_settings.UPLOADS_PER_MINUTE) == (20, 30)
        assert agent_settings.MAX_REQUEST_BYTES is None  # the body limit then follows MAX_FILE_BYTES


def test_the_beat_schedule_sends_every_periodic_task_of_the_app_and_the_sites_use_it():
    from celery import current_app
    from django.conf import settings

    from agent import tasks  # noqa: F401  (registers the tasks)
    from agent.schedule import BEAT_SCHEDULE

    sent = {entry["task"] for entry in BEAT_SCHEDULE.values()}
    assert sent == {"agent.sweep_turns", "agent.purge_chats", "agent.purge_attachments", "agent.purge_telegram"}
    assert sent <= set(current_app.tasks)
    assert settings.CELERY_BEAT_SCHEDULE is BEAT_SCHEDULE  # the tests' site keeps no copy of its own
