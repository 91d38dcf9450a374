"""Prompt mentions, on their own: which messages are mentions, how a saved prompt is filled,
which files a mention may read, and what the model reads of a user's event."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from hearth.engine import views
from hearth.engine.intake import mentions
from hearth.engine.intake.mentions import Mention, expand, parse
from hearth.errors import Refusal
from hearth.store.transcript import EventRow


def sent(template: str, text: str, name: str = "p") -> str:
    mention = parse(text)
    assert mention is not None, text
    return expand(name, template, mention)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    prompts = tmp_path / "home" / "prompts"
    prompts.mkdir(parents=True)
    return prompts


# ------------------------------------------------------------------ what is a mention


@pytest.mark.parametrize("text", [
    "bob@example.com hi", "@ alone", "@", "@Bob hello", "@../etc/passwd", "@a/b c",
    "@..", "@.hidden", "@x.md", "@user@example.com", "@-dash first", "@_under first",
    "write to @someone", "@" + "a" * 65,
])
def test_what_is_not_a_mention(text: str) -> None:
    assert parse(text) is None


def test_a_mention_its_line_and_the_lines_after() -> None:
    mention = parse("  @summarize topic=cats  \n\n  indented body\nsecond\n\n")
    assert mention == Mention("summarize", "topic=cats", "  indented body\nsecond")
    assert mention.arguments == "topic=cats\n  indented body\nsecond"
    assert parse("@a" + "b" * 63) is not None  # 64 characters is the longest name
    assert parse("@x_1-y") == Mention("x_1-y", "", "")


# ------------------------------------------------------------------ filling a prompt


def test_named_values_fill_their_placeholders() -> None:
    assert sent("Summarize {{topic}} in {{ words }} words.",
                "@p topic=cats words=50") == "Summarize cats in 50 words."


def test_quoted_values_hold_spaces() -> None:
    assert sent("Tell {{who}}: {{arg1}}", '@p who="the whole team" "good news"'
                ) == "Tell the whole team: good news"


def test_positional_words_fill_arg1_to_arg9_in_order_named_ones_aside() -> None:
    text = "@p one k=v two 3 4 5 6 7 8 9 ten"
    assert sent("{{arg1}}|{{arg2}}|{{arg9}}|{{k}}", text) == "one|two|9|v"


def test_arguments_is_everything_after_the_name_as_typed() -> None:
    typed = '@p  a "b c" k=v\nsecond line  \\n as typed'
    assert sent("<{{arguments}}>", typed) == '<a "b c" k=v\nsecond line  \\n as typed>'


def test_an_open_quote_makes_the_line_plain_words() -> None:
    assert sent("[{{arg1}}][{{arg2}}][{{k}}]", '@p "open k=v') == '["open][][v]'
    assert sent("{{arg1}}-{{arg2}}", "@p what's up") == "what's-up"  # an apostrophe is a letter
    assert sent("{{arg1}}", r"@p C:\temp\x") == r"C:\temp\x"  # a backslash stays


def test_unfilled_placeholders_become_empty() -> None:
    assert sent("A{{missing}}B{{arg3}}C", "@p topic=cats") == "ABC\n\ntopic=cats"


def test_text_with_no_placeholder_to_take_it_follows_the_prompt() -> None:
    assert sent("Be brief.\n", "@p the meeting notes\nline two") == (
        "Be brief.\n\nthe meeting notes\nline two")


def test_lines_after_the_mention_follow_a_prompt_that_took_the_line() -> None:
    assert sent("Translate into {{lang}}:", "@p lang=French\nBonjour tout le monde") == (
        "Translate into French:\n\nBonjour tout le monde")


def test_a_prompt_with_arguments_takes_everything() -> None:
    assert sent("Q: {{arguments}}", "@p why\nis the sky blue") == "Q: why\nis the sky blue"


def test_a_value_is_not_expanded_again() -> None:
    assert sent("{{a}} {{b}}", "@p a={{b}} b=x") == "{{b}} x"


def test_reserved_names_are_not_taken_by_key_value() -> None:
    assert sent("{{arguments}}|{{arg1}}", "@p arguments=x") == "arguments=x|arguments=x"


def test_an_empty_expansion_is_refused() -> None:
    with pytest.raises(Refusal) as refused:
        sent("{{missing}}\n", "@p")
    assert refused.value.code == "prompt_empty"


def test_an_expansion_larger_than_a_message_is_refused() -> None:
    with pytest.raises(Refusal) as refused:
        sent("{{arguments}}" * 2000, "@p " + "x" * 1000)
    assert refused.value.code == "message_too_large" and refused.value.status == 413


# ------------------------------------------------------------------ the files


def test_a_prompt_is_read_from_its_file(folder: Path) -> None:
    (folder / "summarize.md").write_text("Summarize {{topic}}.\n", encoding="utf-8")
    assert mentions.read(folder, "summarize") == "Summarize {{topic}}.\n"
    assert mentions.read(folder, "other") is None
    assert mentions.read(folder.parent / "nowhere", "summarize") is None


@pytest.mark.parametrize("name", ["../secret", "a/b", "/etc/passwd", "..", "UP", "x.md"])
def test_a_name_outside_the_rule_reads_nothing(folder: Path, name: str) -> None:
    (folder.parent / "secret.md").write_text("outside", encoding="utf-8")
    (folder / "a").mkdir()
    (folder / "a" / "b.md").write_text("nested", encoding="utf-8")
    assert mentions.read(folder, name) is None


def test_a_symlink_out_of_the_folder_is_refused(folder: Path) -> None:
    outside = folder.parent / "secret.txt"
    outside.write_text("the owner's secret", encoding="utf-8")
    os.symlink(outside, folder / "leak.md")
    with pytest.raises(Refusal) as refused:
        mentions.read(folder, "leak")
    assert refused.value.code == "prompt_outside"
    assert "secret" not in refused.value.sentence.replace("secret.txt", "")
    assert mentions.listing(folder) == []


def test_a_symlink_inside_the_folder_is_read(folder: Path) -> None:
    (folder / "long-name.md").write_text("Hello {{arg1}}", encoding="utf-8")
    os.symlink(folder / "long-name.md", folder / "hi.md")
    assert mentions.read(folder, "hi") == "Hello {{arg1}}"


def test_a_file_larger_than_the_limit_is_refused_saying_so(folder: Path) -> None:
    (folder / "big.md").write_bytes(b"x" * (mentions.MAX_PROMPT_BYTES + 1))
    (folder / "edge.md").write_bytes(b"y" * mentions.MAX_PROMPT_BYTES)
    with pytest.raises(Refusal) as refused:
        mentions.read(folder, "big")
    assert refused.value.code == "prompt_too_large" and "64 KiB" in refused.value.sentence
    assert mentions.read(folder, "edge") == "y" * mentions.MAX_PROMPT_BYTES
    assert [p.name for p in mentions.listing(folder)] == ["edge"]


def test_a_file_not_utf8_is_refused(folder: Path) -> None:
    (folder / "latin.md").write_bytes("café".encode("latin-1"))
    with pytest.raises(Refusal) as refused:
        mentions.read(folder, "latin")
    assert refused.value.code == "prompt_unreadable"


def test_the_listing_names_describes_and_lists_placeholders(folder: Path) -> None:
    (folder / "summarize.md").write_text(
        "\n# Summarize a topic\n\n{{topic}} in {{words}} words; {{ topic }} again.\n",
        encoding="utf-8")
    (folder / "Bad Name.md").write_text("ignored", encoding="utf-8")
    (folder / "notes.txt").write_text("ignored", encoding="utf-8")
    (folder / "blank.md").write_text("", encoding="utf-8")
    listed = mentions.listing(folder)
    assert [(p.name, p.description, p.placeholders) for p in listed] == [
        ("blank", "", ()), ("summarize", "Summarize a topic", ("topic", "words"))]


# ------------------------------------------------------------------ admission's view


def test_prepare_adds_what_was_sent_to_the_meta(folder: Path) -> None:
    (folder / "summarize.md").write_text("Summarize {{topic}}.", encoding="utf-8")
    prepared = asyncio.run(mentions.prepare(folder, "@summarize topic=cats", {"x": 1}))
    assert prepared.meta == {"x": 1, "prompt": {"name": "summarize",
                                                "sent": "Summarize cats."}}
    assert prepared.unknown is None
    unknown = asyncio.run(mentions.prepare(folder, "@nothing here", None))
    assert unknown.meta is None and unknown.unknown == "nothing"
    plain = asyncio.run(mentions.prepare(folder, "me@example.com", {"x": 1}))
    assert plain.meta == {"x": 1} and plain.unknown is None


def _event(kind: str, text: str, meta: dict[str, object]) -> EventRow:
    return EventRow("k", 1, "e", None, None, kind, {"text": text}, meta, None, None, 0.0)


def test_the_model_reads_what_was_sent_and_the_export_quotes_it() -> None:
    expanded = _event("user", "@p x", {"prompt": {"name": "p", "sent": "line 1\n\nline 3"}})
    plain = _event("user", "hello", {})
    assert views.sent_text(expanded) == "line 1\n\nline 3"
    assert views.sent_text(plain) == "hello"
    assert mentions.sent_markdown(expanded) == [
        "*Sent as the saved prompt p:*", "", "> line 1", ">", "> line 3", ""]
    assert mentions.sent_markdown(plain) == []
