"""Answers worth reading: Markdown tables and fenced code highlighted on the server, safe under the CSP."""

from __future__ import annotations

from agent.web.rendering import HIGHLIGHT_MAX_CHARS, render_markdown
from tests.support.inert import active_parts


def test_a_table_renders_with_alignment_as_classes_not_styles():
    html = render_markdown("| name | n |\n|:--|--:|\n| milk | 2 |\n")

    assert "<table>" in html and '<th class="align-left">name</th>' in html
    assert '<td class="align-right">2</td>' in html
    assert "style=" not in html


def test_fenced_code_is_highlighted_into_classes_and_stays_escaped():
    html = render_markdown("```python\nprint('<b>hi</b>')\n```")

    assert html.startswith('<pre class="code-block" data-language="python"><code class="highlight">')
    assert '<span class="hl-nb">print</span>' in html
    assert "&lt;b&gt;hi&lt;/b&gt;" in html and "<b>" not in html
    assert "style=" not in html


def test_code_in_an_unknown_or_hostile_language_is_plain_and_escaped():
    html = render_markdown('```"><script>x</script>\n<i>code</i>\n```')

    assert "<script" not in html and "<i>" not in html
    assert "&lt;i&gt;code&lt;/i&gt;" in html
    assert active_parts(html) == []


def test_code_too_long_to_highlight_is_shown_plain():
    code = "x = 1\n" * (HIGHLIGHT_MAX_CHARS // 6 + 1)

    html = render_markdown(f"```python\n{code}```")

    assert "hl-" not in html and html.count("x = 1") == code.count("x = 1")
