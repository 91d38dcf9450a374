"""`GET /api/search` on a real gateway: what the owner and the answers said in kept chats is
found (never in an Incognito or Temporary chat; a deleted chat's words leave), the filters
narrow, paging walks on, hostile queries answer 200, and whatever cannot be searched answers
422 in the error envelope."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import httpx
import pytest

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Api, module_gateway
from tests.support.http import error_of
from tests.support.search import HOSTILE

server, gateway, api = module_gateway("search-api")


def talk(api: Api, server: ScriptedModelServer, key: str, said: str, answer: str) -> None:
    server.push(Reply(text=answer))
    assert api.wait(api.send(key, said)["run_id"])["status"] == "complete"


def search(api: Api, q: str, **params: Any) -> dict[str, Any]:
    answer = api.http.get("/api/search", params={"q": q, **params})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def keys(api: Api, q: str, **params: Any) -> list[str]:
    return sorted(r["key"] for r in search(api, q, **params)["results"])


def test_what_the_owner_and_the_answer_said_is_found(api: Api,
                                                     server: ScriptedModelServer) -> None:
    key = api.new_chat()
    talk(api, server, key, "Where should the marmalitz go?", "The marmalitz goes on the shelf.")
    found = search(api, "marmalitz")
    assert sorted((r["key"], r["kind"], r["seq"]) for r in found["results"]) == [
        (key, "assistant", 2), (key, "user", 1)]
    for result in found["results"]:
        start, end = result["marks"][0]
        assert result["snippet"][start:end] == "marmalitz"
        assert result["title"] and result["off_path"] is False
        assert result["created_at"].startswith(str(date.today().year))
    assert found["query"] == "marmalitz" and found["next_cursor"] is None


@pytest.mark.parametrize("mode", ["incognito", "temporary"])
def test_a_restricted_chats_words_are_never_found(api: Api, server: ScriptedModelServer,
                                                 mode: str) -> None:
    word = f"zorblat{mode}"
    secret = api.new_chat(memory_mode=mode)
    talk(api, server, secret, f"my {word} is private", f"Noted, {word}.")
    assert search(api, word)["results"] == []
    kept = api.new_chat()  # positive control: the same word in a kept chat is found
    talk(api, server, kept, f"my {word} is kept", "Kept.")
    assert keys(api, word) == [kept]


def test_a_deleted_chats_words_leave_the_results(api: Api, server: ScriptedModelServer) -> None:
    gone, kept = api.new_chat(), api.new_chat()
    talk(api, server, gone, "the quibbleton plan", "About the quibbleton plan.")
    talk(api, server, kept, "the quibbleton review", "Reviewed.")
    assert keys(api, "quibbleton") == sorted([gone, gone, kept])
    assert api.http.delete(f"/api/sessions/{gone}").status_code == 200
    assert keys(api, "quibbleton") == [kept]


def test_each_filter_narrows(api: Api, server: ScriptedModelServer) -> None:
    plain, filed, tagged, pinned, shelved = (api.new_chat() for _ in range(5))
    for key in (plain, filed, tagged, pinned, shelved):
        talk(api, server, key, "a flumbrous note", "Ok.")
    for key, change in ((filed, {"folder": "Work"}), (tagged, {"tags": ["Garden"]}),
                        (pinned, {"pinned": True}), (shelved, {"archived": True})):
        assert api.http.patch(f"/api/sessions/{key}", json=change).status_code == 200
    assert keys(api, "flumbrous") == sorted([plain, filed, tagged, pinned])
    assert keys(api, "flumbrous", folder="Work") == [filed]
    assert keys(api, "flumbrous", tag="garden") == [tagged]
    assert keys(api, "flumbrous", pinned="1") == [pinned]
    assert keys(api, "flumbrous", pinned="0") == sorted([plain, filed, tagged])
    assert keys(api, "flumbrous", archived="1") == [shelved]
    today, tomorrow = date.today(), date.today() + timedelta(days=1)
    assert len(keys(api, "flumbrous", since=str(today), until=str(today))) == 4
    assert keys(api, "flumbrous", since=str(tomorrow)) == []
    assert keys(api, "flumbrous", until=str(today - timedelta(days=1))) == []
    empty = {"folder": "", "tag": "", "pinned": "", "archived": "", "since": "", "until": "",
             "limit": "", "cursor": ""}  # a form's empty fields are fields left out
    assert len(keys(api, "flumbrous", **empty)) == 4


def test_an_earlier_answer_is_found_only_when_asked(api: Api,
                                                   server: ScriptedModelServer) -> None:
    key = api.new_chat()
    talk(api, server, key, "Name a colour", "Vermilionette, I say.")
    server.push(Reply(text="Cerulean, then."))
    answer = api.http.post(f"/api/sessions/{key}/regenerate", json={})
    assert answer.status_code == 202, answer.text
    assert api.wait(answer.json()["run_id"])["status"] == "complete"
    assert search(api, "vermilionette")["results"] == []  # the earlier variant is off the path
    [earlier] = search(api, "vermilionette", off_path="1")["results"]
    assert earlier["off_path"] is True and earlier["key"] == key
    assert keys(api, "cerulean") == [key]


def test_a_chat_whose_title_matches_is_listed_on_the_first_page(api: Api) -> None:
    key = api.new_chat()
    assert api.http.patch(f"/api/sessions/{key}", json={"title": "Trip to Grenoble"}
                          ).status_code == 200
    found = search(api, "grenoble")
    assert found["chats"] == [{"key": key, "title": "Trip to Grenoble"}]
    assert search(api, "grenoble", archived="1")["chats"] == []


def test_pages_follow_the_cursor(api: Api, server: ScriptedModelServer) -> None:
    key = api.new_chat()
    for n in range(3):
        talk(api, server, key, f"plinkett number {n}", f"Answer {n}.")
    seen, cursor = [], ""
    for _ in range(5):
        page = search(api, "plinkett", limit=1, cursor=cursor)
        seen += [r["seq"] for r in page["results"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == [1, 3, 5]


@pytest.mark.parametrize("query", HOSTILE[:-1])  # the last one, a NUL, cannot be in a URL
def test_hostile_queries_answer_200(api: Api, query: str) -> None:
    answer = api.http.get("/api/search", params={"q": query})
    assert answer.status_code in (200, 422), answer.text
    if answer.status_code == 422:  # only what is empty once trimmed
        assert not query.split()


@pytest.mark.parametrize(("params", "code"), [
    ({"q": ""}, "invalid_query"),
    ({"q": "   "}, "invalid_query"),
    ({}, "invalid_query"),
    ({"q": "x" * 201}, "invalid_request"),
    ({"q": "x", "since": "2026-13-01"}, "invalid_request"),
    ({"q": "x", "since": "yesterday"}, "invalid_request"),
    ({"q": "x", "until": "2026-1-1"}, "invalid_request"),
    ({"q": "x", "since": "2026-03-02", "until": "2026-03-01"}, "invalid_dates"),
    ({"q": "x", "limit": "0"}, "invalid_limit"),
    ({"q": "x", "limit": "51"}, "invalid_limit"),
    ({"q": "x", "limit": "ten"}, "invalid_limit"),
    ({"q": "x", "limit": "²"}, "invalid_limit"),
    ({"q": "x", "pinned": "maybe"}, "invalid_request"),
    ({"q": "x", "archived": "2"}, "invalid_request"),
    ({"q": "x", "off_path": "yes"}, "invalid_request"),
    ({"q": "x", "cursor": "not-a-cursor"}, "invalid_cursor"),
    ({"q": "x", "folder": "f" * 201}, "invalid_request"),
])
def test_what_cannot_be_searched_answers_422_in_the_envelope(api: Api, params: dict[str, str],
                                                             code: str) -> None:
    assert error_of(api.http.get("/api/search", params=params), 422, code)


def test_search_needs_the_token(api: Api, gateway: Any) -> None:
    answer = httpx.get(f"{gateway.url}/api/search", params={"q": "x"})
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"
