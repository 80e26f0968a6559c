"""The dashboard's Markdown renderer: the marks people and models write become formatting, and
nothing a message holds becomes markup of its own (memory_app/dashboard/markdown.py)."""

from __future__ import annotations

import re

import pytest

from memory_app.dashboard.markdown import MAX_MARKDOWN_CHARS, render_markdown

ALLOWED_TAGS = {"div", "p", "br", "strong", "em", "code", "pre", "ul", "ol", "li", "blockquote", "hr", "a"}


def tags(rendered: str) -> set[str]:
    return {name.lower() for name in re.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", rendered)}


def test_it_renders_headings_lists_code_and_emphasis() -> None:
    text = (
        "# Plan\n"
        "Some **bold**, *italic* and `inline_code()` text.\n\n"
        "- first\n- second\n  continued\n\n"
        "3. three\n4. four\n\n"
        "```python\nprint('hi')\n```\n"
        "> quoted\n\n"
        "---"
    )

    rendered = render_markdown(text)

    assert rendered.startswith('<div class="md">')
    assert '<p class="md-h md-h1"><strong>Plan</strong></p>' in rendered
    assert "<strong>bold</strong>" in rendered and "<em>italic</em>" in rendered
    assert "<code>inline_code()</code>" in rendered
    assert "<ul><li>first</li><li>second<br>continued</li></ul>" in rendered
    assert '<ol start="3"><li>three</li><li>four</li></ol>' in rendered
    assert '<pre class="md-code" tabindex="0" data-lang="python"><code>print(&#x27;hi&#x27;)</code></pre>' in rendered
    assert "<blockquote><p>quoted</p></blockquote>" in rendered
    assert "<hr>" in rendered


def test_a_heading_keeps_a_hash_that_belongs_to_its_text() -> None:
    assert "<strong>Learn C#</strong>" in render_markdown("## Learn C#")
    assert "<strong>Closed</strong>" in render_markdown("## Closed ##")


def test_it_keeps_line_breaks_and_paragraphs() -> None:
    assert render_markdown("one\ntwo\n\nthree") == '<div class="md"><p>one<br>two</p><p>three</p></div>'


def test_underscores_in_names_and_marks_inside_code_stay_as_written() -> None:
    rendered = render_markdown("call snake_case_name with `a*b*c` and `__init__`")

    assert "snake_case_name" in rendered
    assert "<code>a*b*c</code>" in rendered and "<code>__init__</code>" in rendered
    assert "<em>" not in rendered and "<strong>" not in rendered


def test_links_are_http_or_https_only() -> None:
    rendered = render_markdown("[docs](https://example.com/a_b?x=1&y=2) and [home](http://example.org)")

    assert (
        '<a href="https://example.com/a_b?x=1&amp;y=2" rel="nofollow noopener noreferrer" target="_blank">docs</a>'
        in rendered
    )
    assert '<a href="http://example.org"' in rendered


@pytest.mark.parametrize(
    "attack",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "[click](javascript:alert(1))",
        "[click](JAVASCRIPT:alert(1))",
        "[click](data:text/html;base64,PHNjcmlwdD4=)",
        "[click](vbscript:msgbox(1))",
        '[x](https://e.com/" onmouseover="alert(1))',
        "[x](https://e.com/'onmouseover='alert(1))",
        "[x](https://e.com/<script>)",
        "**<b onclick=alert(1)>bold</b>**",
        "`<script>alert(1)</script>`",
        "```\n</code></pre><script>alert(1)</script>\n```",
        "# <iframe src=https://evil.example>",
        "- <svg onload=alert(1)>",
        "> <a href=javascript:alert(1)>x</a>",
        '```js" onmouseover="alert(1)\nx\n```',
        "\x00<script>\x00",
    ],
)
def test_nothing_a_message_holds_becomes_markup_or_a_script_link(attack: str) -> None:
    rendered = str(render_markdown(attack))

    assert tags(rendered) <= ALLOWED_TAGS
    assert "<script" not in rendered and "<img" not in rendered and "<svg" not in rendered
    assert "<iframe" not in rendered
    for href in re.findall(r'href="([^"]*)"', rendered):
        assert href.startswith(("http://", "https://")), href
        assert "<" not in href and ">" not in href and "'" not in href
    # Every attribute is one of the renderer's own; no handler slips in.
    assert not re.search(r"<[^>]*\son\w+=", rendered)


def test_very_long_text_is_shown_escaped_and_unformatted() -> None:
    text = "**x** <b>" + "a" * MAX_MARKDOWN_CHARS

    rendered = render_markdown(text)

    assert rendered.startswith('<div class="md md-plain">**x** &lt;b&gt;')


def test_a_table_is_rendered_as_a_table_with_its_alignment() -> None:
    text = "Results:\n\n| test | status | ms |\n|:--|:-:|--:|\n| login | **pass** | 12 |\n| a \\| b | fail |\n\nDone."

    rendered = render_markdown(text)

    assert "|" not in rendered.replace("a | b", "")  # no raw pipes left, an escaped one kept as text
    assert '<th class="md-left">test</th><th class="md-center">status</th><th class="md-right">ms</th>' in rendered
    assert '<td class="md-center"><strong>pass</strong></td>' in rendered
    assert '<td class="md-left">a | b</td><td class="md-center">fail</td><td class="md-right"></td>' in rendered
    assert rendered.endswith("<p>Done.</p></div>")


def test_a_table_cell_is_escaped_like_every_other_text() -> None:
    rendered = render_markdown("| a |\n|---|\n| <script>alert(1)</script> |")

    assert "<script>" not in rendered and "&lt;script&gt;" in rendered


def test_pipes_without_a_delimiter_row_stay_text() -> None:
    assert render_markdown("left | right\nnext line") == '<div class="md"><p>left | right<br>next line</p></div>'
