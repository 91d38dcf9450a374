"""Splitting to a channel's size: nothing lost, nothing over, cuts at breaks, fences kept."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from hearth.channels.chunking import split, utf16_units

TEXT = st.text(alphabet=st.sampled_from(list("ab c\n.é😀`")), max_size=3000)


def _without_fences(parts: list[str]) -> str:
    """The parts joined, with the fences a split added taken out again (for cuts at line
    ends, where a closing fence is added without a line break of its own)."""
    out = []
    for index, part in enumerate(parts):
        if index > 0 and part.startswith("```") and parts[index - 1].endswith("\n```"):
            part = part.split("\n", 1)[1]
        if index < len(parts) - 1 and part.endswith("\n```") and parts[index + 1].startswith(
                "```"):
            part = part[: -len("```")]
        out.append(part)
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(TEXT, st.integers(min_value=48, max_value=700))
def test_the_parts_fit_and_keep_every_character(text: str, limit: int) -> None:
    parts = split(text, limit, utf16_units)
    assert all(utf16_units(p) <= limit for p in parts)
    if "```" not in text:
        assert "".join(parts) == text


def test_a_cut_falls_at_a_paragraph_then_a_line_then_a_space() -> None:
    para = "a" * 60 + "\n\n" + "b" * 60
    assert split(para, 100) == ["a" * 60 + "\n\n", "b" * 60]
    words = " ".join(["word"] * 40)
    parts = split(words, 60)
    assert all(not p.startswith(" ") and p.rstrip().endswith("word") for p in parts)
    assert "".join(parts) == words


def test_a_run_without_breaks_is_cut_at_the_limit_and_never_splits_a_pair() -> None:
    emoji = "😀" * 100  # two UTF-16 units each
    parts = split(emoji, 60, utf16_units)
    assert "".join(parts) == emoji and all(utf16_units(p) <= 60 for p in parts)


def test_a_code_block_cut_in_two_is_closed_and_opened_again() -> None:
    code = "```python\n" + "".join(f"x{n} = {n}\n" for n in range(60)) + "```\nafter"
    parts = split(code, 200)
    assert len(parts) > 2
    for part in parts[:-1]:
        assert part.count("```") % 2 == 0, part  # every part's fences are balanced
    assert all(p.startswith("```python") for p in parts[1:-1])
    assert _without_fences(parts) == code


def test_a_limit_too_small_is_refused() -> None:
    with pytest.raises(ValueError):
        split("x" * 100, 10)
