"""Code blocks in an answer (web/pages/code.py): the language named, the words coloured by
Pygments' classes, every character escaped, a hostile fence inert."""

from __future__ import annotations

from hearth.web.pages.markdown import render

FENCE = "```{info}\n{code}\n```\n"


def test_a_known_language_is_named_and_coloured() -> None:
    html = render(FENCE.format(info="python", code='def f(x):\n    return "<b>" + x  # why'))
    assert '<span class="code-lang">python</span>' in html
    assert '<code class="language-python">' in html
    assert '<span class="k">def</span>' in html and '<span class="nf">f</span>' in html
    assert '<span class="c1"># why</span>' in html
    assert "&lt;b&gt;" in html and "<b>" not in html


def test_an_unknown_language_is_named_and_drawn_plain() -> None:
    html = render(FENCE.format(info="klingon", code="qapla' <x>"))
    assert '<span class="code-lang">klingon</span>' in html
    assert "qapla&#39; &lt;x&gt;" in html and "<span class=" not in html.split("<pre>")[1]


def test_a_block_with_no_language_has_a_head_and_no_name() -> None:
    for text in (FENCE.format(info="", code="plain"), "    indented <i>\n"):
        html = render(text)
        assert '<div class="code-head"></div>' in html and "code-lang" not in html
        assert "<i>" not in html


def test_a_hostile_fence_is_inert() -> None:
    hostile = FENCE.format(info='"><script>alert(1)</script> x', code="</code></pre><img src=x>")
    html = render(hostile)
    assert "<script>" not in html and "<img" not in html
    assert 'class="language-' not in html  # a name unfit for a class gets none
    assert "&lt;script&gt;" in html  # shown as its text


def test_a_long_block_is_drawn_plain_rather_than_coloured_slowly() -> None:
    html = render(FENCE.format(info="python", code="x = 1\n" * 40_000))
    assert '<span class="code-lang">python</span>' in html and '<span class="n">' not in html
