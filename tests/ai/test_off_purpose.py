"""The off-purpose marker: held back from a draft, cut from the answer, a flag only with the turn's nonce."""

from __future__ import annotations

import pytest

from agent.ai import off_purpose


@pytest.mark.parametrize(
    ("so_far", "shown"),
    [
        ("Sorry, I only help with notes.", "Sorry, I only help with notes."),
        ("Sorry. ⟦", "Sorry."),
        ("Sorry. ⟦off_pur", "Sorry."),
        ("Sorry. ⟦off_purpose: a poem", "Sorry."),
        ("Sorry. ⟦off_purpose: a ⟦poem⟧", "Sorry."),
        ("The range ⟦1, 2⟧ is closed.", "The range ⟦1, 2⟧ is closed."),
    ],
)
def test_a_draft_holds_back_a_marker_begun_at_its_end_and_nothing_else(so_far: str, shown: str) -> None:
    assert off_purpose.draft_text(so_far) == shown


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("Sorry. ⟦off_purpose: n0nce a poem⟧", "a poem"),
        ("Sorry. ⟦off_purpose: n0nce⟧", ""),
        ("Sorry. ⟦off_purpose: a poem⟧", None),
        ("Sorry. ⟦off_purpose: other a poem⟧", None),
        ("Sorry. ⟦off_purpose: n0nce2 a poem⟧", None),
        ("Sorry. ⟦off_purpose:⟧", None),
    ],
)
def test_a_marker_at_the_end_is_always_cut_and_flags_only_with_the_turns_nonce(
    content: str, reason: str | None
) -> None:
    assert off_purpose.cut_marker(content, "n0nce") == ("Sorry.", reason)
