"""Saved prompts through the real gateway: `GET /api/prompts` lists them (token or the
dashboard's cookie), a message `@name key=value` reaches the model expanded while the chat
keeps what was typed (and what was sent, in `meta.prompt`), on every way in (the API, a new
chat's first message, later turns' history, the Markdown export); a name with no saved prompt
is sent as typed with a notice right after it; a prompt file too large is refused, nothing
admitted. `hearth chat`'s `/prompts` lists them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hearth.client.api import GatewayApi
from hearth.client.repl import Repl
from hearth.engine.intake.mentions import MAX_PROMPT_BYTES
from hearth.web.http import signin
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway, kinds, module_gateway
from tests.support.http import error_of
from tests.support.terminal import Typed

server, gateway, api = module_gateway("prompts-api")

SUMMARIZE = "# Summarize a topic\n\nSummarize what you know about {{topic}} in {{lines}} lines.\n"


@pytest.fixture(autouse=True)
def prompts(gateway: Gateway, server: ScriptedModelServer) -> Iterator[Path]:
    folder = gateway.home / "prompts"
    folder.mkdir(exist_ok=True)
    (folder / "summarize.md").write_text(SUMMARIZE, encoding="utf-8")
    (folder / "review.md").write_text("Review this:\n{{arguments}}", encoding="utf-8")
    server.reset()
    yield folder
    for made in folder.iterdir():
        made.unlink()


def last_user_message(server: ScriptedModelServer) -> object:
    return [m for m in server.requests[-1].messages if m["role"] == "user"][-1]["content"]


def user_texts(server: ScriptedModelServer) -> list[object]:
    return [m["content"] for m in server.requests[-1].messages if m["role"] == "user"]


def test_the_prompts_are_listed_with_description_and_placeholders(
        api: Api, gateway: Gateway, prompts: Path) -> None:
    (prompts / "Not A Name.md").write_text("left out", encoding="utf-8")
    answer = api.http.get("/api/prompts")
    assert answer.status_code == 200, answer.text
    assert answer.json()["prompts"] == [
        {"name": "review", "description": "Review this:", "placeholders": ["arguments"]},
        {"name": "summarize", "description": "Summarize a topic",
         "placeholders": ["topic", "lines"]}]
    assert Path(answer.json()["folder"]) == prompts
    error_of(httpx.get(f"{gateway.url}/api/prompts"), 401, "unauthorized")


def test_a_mention_reaches_the_model_expanded_and_the_chat_keeps_what_was_typed(
        api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    server.push(Reply(text="Cats purr."), Reply(text="Yes."))
    typed = '@summarize topic=cats lines="three short"'
    assert api.wait(api.send(key, typed)["run_id"])["status"] == "complete"
    expanded = ("# Summarize a topic\n\nSummarize what you know about cats in three short "
                "lines.")
    assert last_user_message(server) == expanded
    messages = api.messages(key)
    assert kinds(messages) == ["user", "assistant"]  # no notice: the prompt was there
    assert messages[0]["text"] == typed and messages[0]["content"]["text"] == typed
    assert messages[0]["meta"]["prompt"] == {"name": "summarize", "sent": expanded}
    assert api.wait(api.send(key, "And dogs?")["run_id"])["status"] == "complete"
    assert user_texts(server) == [expanded, "And dogs?"]  # the history reads what was sent


def test_text_after_the_mention_follows_a_prompt_that_did_not_take_it(
        api: Api, server: ScriptedModelServer, prompts: Path) -> None:
    (prompts / "brief.md").write_text("Answer in one sentence.", encoding="utf-8")
    key = api.new_chat()
    server.push(Reply(text="Blue light scatters."))
    api.wait(api.send(key, "@brief why is the sky blue?")["run_id"])
    assert last_user_message(server) == "Answer in one sentence.\n\nwhy is the sky blue?"


def test_an_unknown_name_is_sent_as_typed_with_a_notice_after_it(
        api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    server.push(Reply(text="Hm?"))
    sent = api.send(key, "@nosuch please help")
    assert api.wait(sent["run_id"])["status"] == "complete"
    assert last_user_message(server) == "@nosuch please help"
    messages = api.messages(key)
    assert kinds(messages) == ["user", "notice", "assistant"]
    user, notice = messages[0], messages[1]
    assert user["text"] == "@nosuch please help" and "prompt" not in user["meta"]
    assert notice["text"] == "No saved prompt named nosuch; sent as typed."
    assert notice["run_id"] == sent["run_id"] and notice["index"] == user["index"] + 1
    again = api.send(key, "@nosuch please help", client_message_id="m-1")
    assert api.send(key, "@nosuch please help", client_message_id="m-1")["duplicate"]
    api.wait(again["run_id"])
    assert kinds(api.messages(key)).count("notice") == 2  # once for the duplicate's message


@pytest.mark.parametrize("text", ["@ alone", "me@example.com", "@Summarize topic=cats",
                                  "@summarize/../x"])
def test_what_is_not_a_mention_goes_as_typed_without_a_notice(
        api: Api, server: ScriptedModelServer, text: str) -> None:
    key = api.new_chat()
    server.push(Reply(text="ok"))
    api.wait(api.send(key, text)["run_id"])
    assert last_user_message(server) == text
    assert kinds(api.messages(key)) == ["user", "assistant"]


def test_a_prompt_file_too_large_is_refused_and_nothing_admitted(
        api: Api, prompts: Path) -> None:
    (prompts / "huge.md").write_bytes(b"x" * (MAX_PROMPT_BYTES + 1))
    key = api.new_chat()
    answer = api.http.post(f"/api/sessions/{key}/messages", json={"text": "@huge"})
    assert "64 KiB" in error_of(answer, 413, "prompt_too_large")
    assert api.messages(key) == []


def test_a_symlink_out_of_the_folder_is_refused(api: Api, prompts: Path) -> None:
    outside = prompts.parent / "config.toml"
    (prompts / "leak.md").symlink_to(outside)
    key = api.new_chat()
    answer = api.http.post(f"/api/sessions/{key}/messages", json={"text": "@leak"})
    error_of(answer, 422, "prompt_outside")
    assert api.messages(key) == []


def test_a_new_chats_first_message_on_the_dashboard_is_expanded_too(
        api: Api, gateway: Gateway, server: ScriptedModelServer) -> None:
    with httpx.Client(base_url=gateway.url) as browser:
        assert browser.post("/login", data={"token": TOKEN}).status_code == 303
        listed = browser.get("/api/prompts")  # what the composer's script fetches
        assert listed.status_code == 200 and len(listed.json()["prompts"]) == 2
        csrf = signin.csrf_for(TOKEN, browser.cookies[signin.COOKIE])
        server.push(Reply(text="Reviewed."))
        made = browser.post("/chats/new", data={"csrf": csrf, "text": "@review x = 1\ny = 2",
                                                "memory_mode": "persistent"})
    assert made.status_code == 303, made.text
    key = made.headers["location"].rsplit("/", 1)[1]
    assert server.wait_for_requests(1)
    first = api.messages(key)[0]
    assert first["text"] == "@review x = 1\ny = 2"
    assert first["meta"]["prompt"]["sent"] == "Review this:\nx = 1\ny = 2"
    assert last_user_message(server) == "Review this:\nx = 1\ny = 2"


def test_the_markdown_export_shows_what_was_typed_and_what_was_sent(
        api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    server.push(Reply(text="Done."))
    api.wait(api.send(key, "@summarize topic=owls lines=2")["run_id"])
    text = api.http.get(f"/api/sessions/{key}/export", params={"format": "markdown"}).text
    assert "@summarize topic=owls lines=2" in text
    assert "*Sent as the saved prompt summarize:*" in text
    assert "> Summarize what you know about owls in 2 lines." in text



def test_the_terminals_prompts_command_lists_them(gateway: Gateway, prompts: Path) -> None:
    client = GatewayApi(gateway.url, TOKEN)
    screen = Typed("/prompts")
    try:
        assert Repl(client, screen, None).run() == 0
        for made in prompts.iterdir():
            made.unlink()
        empty = Typed("/prompts")
        Repl(client, empty, None).run()
    finally:
        client.close()
    said = screen.err.getvalue()
    assert "  @review  Review this: — {{arguments}}\n" in said
    assert "  @summarize  Summarize a topic — {{topic}} {{lines}}\n" in said
    assert "No saved prompts yet" in empty.err.getvalue()
