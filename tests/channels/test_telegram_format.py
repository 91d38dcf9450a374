"""Markdown to Telegram's HTML: what Telegram can show, everything escaped, unsafe links
dropped; checked by the fake Bot API's own HTML parser (Telegram's rules)."""

from __future__ import annotations

from hearth.channels.telegram_format import to_html

CASES = {
    "**bold** and *it* and ~~gone~~": "<b>bold</b> and <i>it</i> and <s>gone</s>",
    "`a < b && c`": "<code>a &lt; b &amp;&amp; c</code>",
    "# Title": "<b>Title</b>",
    "- one\n- two": "• one\n• two",
    "3. three\n4. four": "3. three\n4. four",
    "[site](https://x.org/?a=1&b=2)": '<a href="https://x.org/?a=1&amp;b=2">site</a>',
    "<script>alert(1)</script>": "&lt;script&gt;alert(1)&lt;/script&gt;",
    "```sh\nrm -rf <dir>\n```": '<pre><code class="language-sh">rm -rf &lt;dir&gt;</code></pre>',
    "> quoted": "<blockquote>quoted</blockquote>",
}


def test_markdown_becomes_what_telegram_shows() -> None:
    for markdown, html in CASES.items():
        assert to_html(markdown) == html, markdown


def test_a_link_that_is_not_the_web_stays_text() -> None:
    for markdown in ("[x](javascript:alert(1))", "[x](file:///etc/passwd)"):
        assert "<a" not in to_html(markdown)


def test_what_it_makes_parses_as_telegram_html() -> None:
    from tests.fakes.telegram_server import FakeTelegram

    text = "\n\n".join([*CASES, "| a | b |\n|---|---|\n| 1 | 2 |", "![pic](http://x/y.png)",
                        "a & b < c > d", "nested **bold *and it***"])
    with FakeTelegram() as fake:
        import httpx

        answer = httpx.post(f"{fake.base_url}{fake.token}/sendMessage",
                            data={"chat_id": "5", "text": to_html(text), "parse_mode": "HTML"})
    assert answer.status_code == 200, answer.text
