"""What a chat is called, through the API and the sidebar: an untitled chat by the first
words of its first message (Markdown's marks left out), and by the edit once that message is
edited; a title the title chore made is made again from an edited first message, while a
title the owner gave, or an Incognito chat's, is never overwritten; an edit of a later
message changes no title."""

from __future__ import annotations

import html
import re
import time

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway


def _title(api: Api, key: str) -> str | None:
    answer = api.http.get(f"/api/sessions/{key}")
    assert answer.status_code == 200, answer.text
    title: str | None = answer.json()["session"]["title"]
    return title


def _titled(api: Api, key: str, title: str) -> None:
    deadline = time.monotonic() + 10
    while _title(api, key) != title:
        assert time.monotonic() < deadline, f"{key} is {_title(api, key)!r}, never {title!r}"
        time.sleep(0.05)


def _sent(api: Api, key: str, text: str, server: ScriptedModelServer,
          title: str | None = None) -> None:
    """`text` answered; its title chore answers `title`, or (None) with no usable title."""
    server.push(Reply(text="Sure."))
    server.push_chore(Reply(text=title if title else "not\na\ntitle"), kind="title")
    assert api.wait(api.send(key, text)["run_id"])["status"] == "complete"


def _edit_first(api: Api, key: str, text: str, server: ScriptedModelServer,
                title: str | None = None) -> None:
    server.push(Reply(text="Sure, again."))
    if title:
        server.push_chore(Reply(text=title), kind="title")
    edited = api.http.post(f"/api/sessions/{key}/edit", json={"index": 0, "text": text})
    assert edited.status_code == 202, edited.text
    assert api.wait(edited.json()["run_id"])["status"] == "complete"


def _roses(api: Api, server: ScriptedModelServer) -> str:
    """A chat its title chore titled "Pruning roses" from its first exchange."""
    key = api.new_chat()
    _sent(api, key, "How do I prune roses?", server, title="Pruning roses")
    _titled(api, key, "Pruning roses")
    return key


def _sidebar_name(gateway: Gateway, key: str) -> str:
    """The name the sidebar shows for chat `key`, in a page the dashboard draws."""
    api = gateway.client()
    drawn = api.http.get("/chats", headers={"Authorization": f"Bearer {TOKEN}"}).text
    side = drawn.split('<aside class="sidebar"', 1)[1].split("</aside>", 1)[0]
    found = re.search(rf'href="/chats/{re.escape(key)}"[^>]*>.*?'
                      r'<span class="chat-link-name">([^<]*)</span>', side, re.S)
    assert found, f"{key} is not in the sidebar"
    return html.unescape(found.group(1))


def _chore_questions(server: ScriptedModelServer) -> list[str]:
    """What each title chore was asked (the exchange it quoted)."""
    return [str(request.messages[-1].get("content")) for request in server.chore_requests
            if request.messages and "You name conversations" in
            str(request.messages[0].get("content"))]


def test_an_untitled_chat_is_called_by_its_first_words_and_then_by_their_edit(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = api.new_chat()
    _sent(api, key, "## Plan a trip\n- to **Porto** in May", model_server)  # no usable title
    assert _title(api, key) is None
    assert _sidebar_name(gateway, key) == "Plan a trip to **Porto** in May"
    _edit_first(api, key, "Plan a trip to Lisbon in June", model_server, title="Lisbon in June")
    _titled(api, key, "Lisbon in June")  # titled again, from the edited exchange
    assert "Lisbon" in _chore_questions(model_server)[-1]
    assert _sidebar_name(gateway, key) == "Lisbon in June"


def test_the_sidebar_calls_an_edited_untitled_chat_by_the_edit(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    model_server.chore_replies["title"] = Reply(text="not\na\ntitle")  # no usable title, ever
    api = gateway.client()
    key = api.new_chat()
    _sent(api, key, "Recipe for pancakes", model_server)
    _edit_first(api, key, "Recipe for waffles", model_server)
    assert _title(api, key) is None
    assert _sidebar_name(gateway, key) == "Recipe for waffles"


def test_a_title_made_from_the_first_message_is_made_again_from_its_edit(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = _roses(api, model_server)
    _edit_first(api, key, "How do I prune apple trees?", model_server,
                title="Pruning apple trees")
    _titled(api, key, "Pruning apple trees")


def test_a_title_you_gave_is_never_overwritten_by_an_edit(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = _roses(api, model_server)
    renamed = api.http.patch(f"/api/sessions/{key}", json={"title": "Garden"})
    assert renamed.status_code == 200, renamed.text
    _edit_first(api, key, "How do I prune apple trees?", model_server, title="Apple trees")
    time.sleep(0.3)  # room for a title chore, were one wrongly asked
    assert _title(api, key) == "Garden"
    assert all("apple" not in q for q in _chore_questions(model_server))


def test_a_later_edit_or_a_private_chat_keeps_its_title(
        gateway: Gateway, model_server: ScriptedModelServer) -> None:
    api = gateway.client()
    key = _roses(api, model_server)
    _sent(api, key, "And when?", model_server)
    model_server.push(Reply(text="In winter."))
    edited = api.http.post(f"/api/sessions/{key}/edit", json={"index": 2, "text": "And how?"})
    assert edited.status_code == 202, edited.text
    api.wait(edited.json()["run_id"])
    assert _title(api, key) == "Pruning roses"  # only the first message names a chat
    hidden = api.new_chat(memory_mode="incognito")
    _sent(api, hidden, "A quiet question", model_server)
    _edit_first(api, hidden, "Another quiet question", model_server)
    assert _title(api, hidden) == "Incognito chat"
    assert _sidebar_name(gateway, hidden) == "Another quiet question"  # its mark says the mode
