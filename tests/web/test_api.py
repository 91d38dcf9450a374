"""The HTTP contract (DESIGN.md "HTTP API") against a real gateway subprocess.

One gateway (and one client) serves the whole module: starting a gateway costs seconds and
an httpx client a tenth of one. Every test makes its own chats, so the tests do not depend
on each other's order.
"""

from __future__ import annotations

import base64
import inspect
import re
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.routing import APIRoute, APIWebSocketRoute, iter_route_contexts

from hearth import __version__
from hearth.config import Config
from hearth.home import Home
from hearth.web.app import create_app
from hearth.web.http.auth import require_token
from hearth.web.http.permissions import permission_of
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway, module_gateway
from tests.support.http import error_of

JSON = {"content-type": "application/json"}
MB = 1024 * 1024


server, gateway, api = module_gateway("api")


@pytest.fixture(scope="module")
def anonymous(gateway: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url, timeout=10) as client:
        yield client


def chat_state(api: Api, key: str) -> dict[str, Any]:
    """What a half-written request would change: title, counters, messages, the run."""
    answer = api.http.get(f"/api/sessions/{key}", params={"limit": 1000})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    return {"title": body["session"]["title"], "message_count": body["session"]["message_count"],
            "last_seq": body["session"]["last_seq"], "messages": body["messages"],
            "running": body["running"], "run_id": body["run_id"]}


def every_listed(api: Api, limit: int = 200, **params: Any) -> list[dict[str, Any]]:
    """All chats GET /api/sessions lists, following the cursor to the end."""
    listed: list[dict[str, Any]] = []
    cursor: str | None = None
    for _page in range(1000):
        query: dict[str, Any] = {"limit": limit, **params}
        if cursor is not None:
            query["cursor"] = cursor
        answer = api.http.get("/api/sessions", params=query)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert len(body["sessions"]) <= limit
        listed += body["sessions"]
        cursor = body["next_cursor"]
        if cursor is None:
            return listed
        assert body["sessions"], "a cursor was handed out with an empty page"
    raise AssertionError("the cursor never ended")


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


# ---------------------------------------------------------------- health and auth


def test_healthz_answers_without_a_token(anonymous: httpx.Client) -> None:
    answer = anonymous.get("/healthz")
    assert answer.status_code == 200
    body = answer.json()
    assert body["ok"] is True and body["version"] == __version__ and body["db"] == "sqlite"
    assert body["models"] and set(body["breakers"]) == set(body["models"])
    assert all(b == {"state": "closed", "since": None, "failures": 0}
               for b in body["breakers"].values())


BAD_AUTH: list[dict[str, Any]] = [
    {},
    {"Authorization": "Bearer wrong-token"},
    {"Authorization": f"Bearer {TOKEN}x"},
    {"Authorization": f"Basic {TOKEN}"},
    {"Authorization": f"Token {TOKEN}"},
    {"Authorization": TOKEN},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer t\xe9st".encode("latin-1")},
]


@pytest.mark.parametrize("headers", BAD_AUTH, ids=lambda h: repr(h.get("Authorization")))
def test_every_route_refuses_a_missing_or_wrong_token(
    api: Api, anonymous: httpx.Client, server: ScriptedModelServer, headers: dict[str, Any]
) -> None:
    key = api.new_chat()
    before_list = [s["key"] for s in every_listed(api)]
    before_chat = chat_state(api, key)
    calls = len(server.requests)
    routes: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", "/api/sessions", {}),
        ("POST", "/api/sessions", {"json": {"name": f"sneaky-{abs(hash(str(headers)))}"}}),
        ("GET", f"/api/sessions/{key}", {}),
        ("PATCH", f"/api/sessions/{key}", {"json": {"title": "hijacked"}}),
        ("POST", f"/api/sessions/{key}/messages", {"json": {"text": "hi"}}),
        ("GET", f"/api/sessions/{key}/events", {"params": {"after": 0}}),
        ("GET", "/api/runs/x", {}),
        ("GET", "/api/runs/x/wait", {"params": {"timeout": 1}}),
    ]
    for method, path, extra in routes:
        with anonymous.stream(method, path, headers=headers, **extra) as answer:
            assert answer.status_code == 401, (method, path, answer.status_code)
            answer.read()
            error_of(answer, 401, "unauthorized")
    # nothing happened: no chat made, none renamed, no message admitted
    assert [s["key"] for s in every_listed(api)] == before_list
    assert chat_state(api, key) == before_chat
    assert len(server.requests) == calls


def test_the_right_token_is_let_in(api: Api) -> None:
    assert api.http.get("/api/sessions").status_code == 200
    lowercase = api.http.get("/api/sessions", headers={"Authorization": f"bearer {TOKEN}"})
    assert lowercase.status_code == 200


# ---------------------------------------------------------------- creating chats

CHAT_KEY = re.compile(r"^chat-(\d+)-(\d+)$")


def test_new_chats_are_named_by_number_and_second(api: Api) -> None:
    first_second = int(time.time())
    first = api.http.post("/api/sessions")
    second = api.http.post("/api/sessions", json={})
    last_second = int(time.time())
    assert first.status_code == 201 and second.status_code == 201
    one, two = first.json(), second.json()
    match_one, match_two = CHAT_KEY.match(one["key"]), CHAT_KEY.match(two["key"])
    assert match_one and match_two, (one["key"], two["key"])
    assert int(match_two.group(1)) == int(match_one.group(1)) + 1
    for match in (match_one, match_two):
        assert first_second <= int(match.group(2)) <= last_second
    assert one["tab_id"] and one["tab_id"] != two["tab_id"]
    assert one["memory_mode"] == "persistent" and one["message_count"] == 0


def test_a_hand_made_chat_number_moves_the_counter_past_it(api: Api) -> None:
    made = api.http.post("/api/sessions", json={"name": "chat-9000-5"})
    assert made.status_code == 201 and made.json()["key"] == "chat-9000-5"
    following = CHAT_KEY.match(api.new_chat())
    assert following is not None and int(following.group(1)) == 9001


def test_a_kept_chats_name_opens_that_chat(api: Api) -> None:
    made = api.http.post("/api/sessions", json={"name": "garden-notes.v2:ideas"})
    assert made.status_code == 201
    assert made.json()["key"] == "garden-notes.v2:ideas"
    again = api.http.post("/api/sessions", json={"name": "garden-notes.v2:ideas"})
    assert again.status_code == 200
    assert again.json()["tab_id"] == made.json()["tab_id"]
    same_mode = api.http.post("/api/sessions",
                              json={"name": "garden-notes.v2:ideas", "memory_mode": "persistent"})
    assert same_mode.status_code == 200 and same_mode.json()["tab_id"] == made.json()["tab_id"]
    key = api.new_chat()
    reopened = api.http.post("/api/sessions", json={"name": key})
    assert reopened.status_code == 200 and reopened.json()["key"] == key


@pytest.mark.parametrize("name", ["../x", "", "a b", "-x", ".hidden", "x/y", "x" * 129,
                                  "caf\u00e9", "a\u0000b"])
def test_an_invalid_chat_name_is_refused(api: Api, name: str) -> None:
    before = [s["key"] for s in every_listed(api)]
    error_of(api.http.post("/api/sessions", json={"name": name}), 422)
    assert [s["key"] for s in every_listed(api)] == before


def test_a_kept_chats_memory_mode_is_fixed(api: Api) -> None:
    made = api.http.post("/api/sessions", json={"name": "fixed-mode"})
    assert made.status_code == 201
    for mode in ("incognito", "temporary"):
        message = error_of(api.http.post("/api/sessions",
                                         json={"name": "fixed-mode", "memory_mode": mode}),
                           409, "memory_mode_fixed")
        assert "persistent" in message
    assert api.http.get("/api/sessions/fixed-mode").json()["session"]["memory_mode"] == (
        "persistent")
    secret = api.http.post("/api/sessions", json={"name": "hush", "memory_mode": "incognito"})
    assert secret.status_code == 201
    error_of(api.http.post("/api/sessions", json={"name": "hush", "memory_mode": "persistent"}),
             409, "memory_mode_fixed")
    error_of(api.http.post("/api/sessions", json={"memory_mode": "bogus"}), 422)


def test_other_bad_create_requests_are_refused(api: Api) -> None:
    error_of(api.http.post("/api/sessions", json={"colour": "red"}), 422)
    error_of(api.http.post("/api/sessions", json=["name"]), 422)
    error_of(api.http.post("/api/sessions", json={"model": "no-such-model"}), 422)
    error_of(api.http.post("/api/sessions", json={"workspace_dir": "relative/dir"}), 422)
    error_of(api.http.post("/api/sessions", content=b'{"name": ', headers=JSON), 400,
             "invalid_json")


def test_an_over_long_workspace_dir_is_refused_not_a_crash(api: Api) -> None:
    answer = api.http.post("/api/sessions", json={"workspace_dir": "/" + "a" * 5000})
    error_of(answer, 422, "invalid_workspace_dir")


# ---------------------------------------------------------------- listing chats


def test_incognito_and_temporary_chats_are_never_listed(api: Api) -> None:
    kept = api.new_chat()
    hidden = []
    for mode in ("incognito", "temporary"):
        made = api.http.post("/api/sessions", json={"memory_mode": mode})
        assert made.status_code == 201 and made.json()["memory_mode"] == mode
        hidden.append(made.json()["key"])
        named = api.http.post("/api/sessions", json={"name": f"secret-{mode}",
                                                     "memory_mode": mode})
        assert named.status_code == 201
        hidden.append(named.json()["key"])
    for key in hidden:  # they exist and can be opened by key...
        assert api.http.get(f"/api/sessions/{key}").status_code == 200
    listed = [s["key"] for s in every_listed(api)] + [s["key"] for s in every_listed(api, 2)]
    assert kept in listed
    assert not set(hidden) & set(listed)  # ...but no listing shows them
    for q in ("secret", "Incognito", "Temporary", "chat"):
        found = [s["key"] for s in every_listed(api, q=q)]
        assert not set(hidden) & set(found), q
        assert {s["memory_mode"] for s in every_listed(api, q=q)} <= {"persistent"}


def test_the_cursor_walks_every_chat_once_newest_first(api: Api) -> None:
    made = [api.new_chat() for _ in range(5)]
    walked = every_listed(api, limit=2)
    keys = [s["key"] for s in walked]
    assert len(keys) == len(set(keys))
    assert keys[:5] == made[::-1]
    assert keys == [s["key"] for s in every_listed(api, limit=200)]
    stamps = [datetime.fromisoformat(s["updated_at"]) for s in walked]
    assert stamps == sorted(stamps, reverse=True)
    # the first two pages by hand: newest first, and the cursor carries on where it stopped
    first = api.http.get("/api/sessions", params={"limit": 2}).json()
    assert [s["key"] for s in first["sessions"]] == made[::-1][:2]
    assert isinstance(first["next_cursor"], str)
    second = api.http.get("/api/sessions",
                          params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [s["key"] for s in second["sessions"]] == made[::-1][2:4]


def test_q_filters_by_title(api: Api) -> None:
    wanted, other = api.new_chat(), api.new_chat()
    assert api.http.patch(f"/api/sessions/{wanted}",
                          json={"title": "Groceries for Sunday qx7"}).status_code == 200
    assert api.http.patch(f"/api/sessions/{other}",
                          json={"title": "Work plan qx7"}).status_code == 200
    assert [s["key"] for s in every_listed(api, q="groceries")] == [wanted]
    assert [s["key"] for s in every_listed(api, q="SUNDAY QX7")] == [wanted]
    assert {s["key"] for s in every_listed(api, q="qx7")} == {wanted, other}
    assert every_listed(api, q="nothing-is-called-this") == []


@pytest.mark.parametrize("cursor", ["garbage", "!!!", "\u00e9t\u00e9", b64("5"),
                                    b64('{"a": 1}'), b64("[1, 2, 3]"), b64('[[1], "x"]'),
                                    "x" * 501])
def test_a_garbage_cursor_is_refused(api: Api, cursor: str) -> None:
    error_of(api.http.get("/api/sessions", params={"cursor": cursor}), 422)


@pytest.mark.parametrize("limit", ["0", "1000", "-1", "201", "many"])
def test_a_limit_out_of_range_is_refused(api: Api, limit: str) -> None:
    error_of(api.http.get("/api/sessions", params={"limit": limit}), 422, "invalid_request")


# ---------------------------------------------------------------- reading one chat


def test_an_unknown_chat_is_404(api: Api) -> None:
    error_of(api.http.get("/api/sessions/no-such-chat"), 404, "session_not_found")
    error_of(api.http.get("/api/sessions/no-such-chat/events"), 404, "session_not_found")


@pytest.fixture(scope="module")
def talked(api: Api, server: ScriptedModelServer) -> str:
    """A chat with three exchanges: indexes 1..6, user then assistant (read-only after)."""
    key = api.new_chat()
    for word in ("one", "two", "three"):
        server.push(Reply(text=f"answer {word}"))
        api.wait(api.send(key, word)["run_id"])
    return key


def test_limit_and_before_give_the_window_just_before(api: Api, talked: str) -> None:
    def window(**params: Any) -> list[tuple[int, str]]:
        answer = api.http.get(f"/api/sessions/{talked}", params=params)
        assert answer.status_code == 200, answer.text
        return [(m["index"], m["text"]) for m in answer.json()["messages"]]

    everything = window(limit=1000)
    assert everything == [(1, "one"), (2, "answer one"), (3, "two"), (4, "answer two"),
                          (5, "three"), (6, "answer three")]
    assert window(limit=2) == everything[4:]
    assert window(limit=2, before=5) == everything[2:4]
    assert window(limit=3, before=3) == everything[:2]
    assert window(limit=2, before=1) == []
    assert window(limit=3, before=100) == everything[3:]
    assert window() == everything
    error_of(api.http.get(f"/api/sessions/{talked}", params={"before": 0}), 422)
    error_of(api.http.get(f"/api/sessions/{talked}", params={"limit": 0}), 422)


def test_a_huge_before_is_answered_not_a_crash(api: Api, talked: str) -> None:
    answer = api.http.get(f"/api/sessions/{talked}", params={"before": 2**63})
    assert answer.status_code in (200, 422), answer.text
    if answer.status_code == 200:
        assert [m["index"] for m in answer.json()["messages"]] == [1, 2, 3, 4, 5, 6]
    else:
        error_of(answer, 422)


def test_a_huge_after_on_events_is_answered_not_a_crash(api: Api, talked: str) -> None:
    with api.http.stream("GET", f"/api/sessions/{talked}/events", params={"after": 2**63},
                         timeout=10) as answer:
        if answer.status_code == 422:
            answer.read()
            error_of(answer, 422)
            return
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if line.startswith("data: ") and '"type":"status"' in line:
                return
    raise AssertionError("the stream ended without a status frame")


def test_events_after_a_seq_replay_the_done_of_the_runs_ended_since(
        api: Api, talked: str) -> None:
    """Over HTTP: after=3 (the second user message) replays the second and third answers,
    each followed by its run's done, and after=6 (the last answer) no done. Before: done
    frames were live-only, so neither stream had one."""
    def replayed(after: int) -> list[tuple[Any, ...]]:
        got = api.frames(talked, after, lambda frame: frame["type"] == "status", timeout=10)
        return [(f["type"], f.get("seq") or f.get("outcome")) for f in got
                if f["type"] in ("message", "done")]

    assert replayed(3) == [("message", 4), ("done", "complete"), ("message", 5),
                           ("message", 6), ("done", "complete")]
    assert replayed(6) == []


# ---------------------------------------------------------------- renaming


def test_patch_renames_and_the_list_shows_it(api: Api) -> None:
    key = api.new_chat()
    answer = api.http.patch(f"/api/sessions/{key}", json={"title": "  Trip to Lisbon  "})
    assert answer.status_code == 200 and answer.json()["title"] == "Trip to Lisbon"
    assert answer.json()["key"] == key
    listed = {s["key"]: s["title"] for s in every_listed(api)}
    assert listed[key] == "Trip to Lisbon"
    assert api.http.get(f"/api/sessions/{key}").json()["session"]["title"] == "Trip to Lisbon"


def test_bad_patches_are_refused_and_change_nothing(api: Api) -> None:
    key = api.new_chat()
    assert api.http.patch(f"/api/sessions/{key}", json={"title": "Kept"}).status_code == 200
    for body in ({"title": ""}, {"title": "New", "pinned": "yes"}, {"pinned": 1},
                 {"title": 5}, {"title": None}, {"title": "x" * 201}, ["title"]):
        error_of(api.http.patch(f"/api/sessions/{key}", json=body), 422)
    error_of(api.http.patch(f"/api/sessions/{key}", content=b"{", headers=JSON), 400,
             "invalid_json")
    assert api.http.get(f"/api/sessions/{key}").json()["session"]["title"] == "Kept"
    error_of(api.http.patch("/api/sessions/no-such-chat", json={"title": "X"}), 404,
             "session_not_found")
    error_of(api.http.get("/api/sessions/no-such-chat"), 404)  # and it was not made


def test_a_whitespace_only_title_is_refused(api: Api) -> None:
    key = api.new_chat()
    assert api.http.patch(f"/api/sessions/{key}", json={"title": "Kept"}).status_code == 200
    error_of(api.http.patch(f"/api/sessions/{key}", json={"title": " \t "}), 422)
    assert api.http.get(f"/api/sessions/{key}").json()["session"]["title"] == "Kept"


# ---------------------------------------------------------------- sending: bad input


def big_body(size: int) -> Iterator[bytes]:
    """A JSON body streamed in chunks with no Content-Length (chunked transfer)."""
    yield b'{"text": "'
    sent = 0
    while sent < size:
        piece = min(256 * 1024, size - sent)
        yield b"a" * piece
        sent += piece
    yield b'"}'


def test_bad_messages_are_refused_and_nothing_is_half_written(
    api: Api, server: ScriptedModelServer
) -> None:
    key = api.new_chat()
    api.http.patch(f"/api/sessions/{key}", json={"title": "Kept"})  # no title chore changes it
    api.wait(api.send(key, "hello")["run_id"])
    before = chat_state(api, key)
    assert before["message_count"] == 2
    calls = len(server.requests)
    post: Callable[..., httpx.Response] = api.http.post
    url = f"/api/sessions/{key}/messages"

    error_of(post("/api/sessions/no-such-chat/messages", json={"text": "hi"}), 404,
             "session_not_found")
    for text in ("", "   ", " \n\t "):
        error_of(post(url, json={"text": text}), 422)
    error_of(post(url, json={"text": "a" * (MB + 1)}), 413)
    error_of(post(url, json={"text": "\u00e9" * (MB // 2 + 1)}), 413)  # bytes, not characters
    error_of(post(url, content=b'{"text": ', headers=JSON), 400, "invalid_json")
    error_of(post(url, content=b"\xff\xfe{", headers=JSON), 400)
    for body in (["hi"], "hi", None, 5, {}, {"text": 5}, {"text": True}, {"text": None},
                 {"text": ["hi"]}, {"text": {"t": "hi"}}, {"text": "hi", "colour": "red"},
                 {"text": "hi", "client_message_id": ""},
                 {"text": "hi", "client_message_id": "x" * 201},
                 {"text": "hi", "client_message_id": 7}):
        error_of(post(url, json=body), 422)
    error_of(post(url, content=b'{"text": "' + b"a" * (4 * MB) + b'"}', headers=JSON), 413,
             "request_too_large")
    error_of(post(url, content=big_body(4 * MB + 1), headers=JSON), 413, "request_too_large")

    time.sleep(0.3)  # a run admitted by mistake would have reached the model by now
    assert chat_state(api, key) == before
    assert len(server.requests) == calls
    assert api.http.get("/api/sessions/no-such-chat").status_code == 404


def test_a_message_of_exactly_the_limit_is_taken(api: Api) -> None:
    key = api.new_chat()
    admitted = api.send(key, "a" * MB)
    assert admitted["status"] == "started"
    api.wait(admitted["run_id"])
    messages = api.messages(key)
    assert messages[0]["kind"] == "user" and len(messages[0]["text"]) == MB


def test_a_lone_surrogate_never_makes_a_chat_unreadable(api: Api) -> None:
    key = api.new_chat()
    answer = api.http.post(f"/api/sessions/{key}/messages", content=b'{"text": "a\\ud800b"}',
                           headers=JSON)
    assert answer.status_code in (202, 422), answer.text
    if answer.status_code == 202:
        api.wait(answer.json()["run_id"])
    else:
        error_of(answer, 422)
    assert api.http.get(f"/api/sessions/{key}").status_code == 200


def test_a_body_that_is_not_utf8_is_invalid_json(api: Api) -> None:
    key = api.new_chat()
    answer = api.http.post(f"/api/sessions/{key}/messages", content=b"\xff\xfe{", headers=JSON)
    error_of(answer, 400, "invalid_json")


# ---------------------------------------------------------------- routes and runs


def test_unknown_routes_and_wrong_methods_answer_the_envelope(api: Api) -> None:
    for path in ("/api/nothing", "/nothing", "/api/sessions/x/y/z", "/api/runs"):
        error_of(api.http.get(path), 404)
    for method, path in (("PUT", "/api/sessions"), ("DELETE", "/api/runs/x"),
                         ("POST", "/healthz"), ("PUT", "/api/sessions/x/messages")):
        error_of(api.http.request(method, path), 405, "method_not_allowed")


def test_runs_unknown_and_bad_waits(api: Api) -> None:
    error_of(api.http.get("/api/runs/run_nope"), 404, "run_not_found")
    error_of(api.http.get("/api/runs/run_nope/wait", params={"timeout": 1}), 404,
             "run_not_found")
    key = api.new_chat()
    run_id = api.send(key, "hi")["run_id"]
    for timeout in ("0", "-1", "601", "soon", "nan"):
        error_of(api.http.get(f"/api/runs/{run_id}/wait", params={"timeout": timeout}), 422)
    done = api.wait(run_id)
    assert done["run_id"] == run_id and done["status"] == "complete"
    assert api.http.get(f"/api/runs/{run_id}").json()["status"] == "complete"


# ---------------------------------------------------------------- census: every route authed


PUBLIC = ("/healthz", "/login",  # the health check and the sign-in page
          "/signin/link/{code}",  # a one-time sign-in link: its code, once, is the proof
          "/sw.js",  # the dashboard's service worker: the gateway's own code, like /static
          "/channels/webhook",  # a webhook's message: authenticated by its signature alone
          "/channels/slack/events", "/channels/slack/actions")  # Slack's: its signature


def calls(dependant: Any) -> Iterator[Any]:
    """What a route's dependencies call, at any depth."""
    for sub in dependant.dependencies:
        yield sub.call
        yield from calls(sub)


def unprotected_routes(app: FastAPI) -> list[str]:
    """Every API route but /healthz whose dependencies (at any depth) lack require_token.

    Routers are walked as FastAPI serves them (`iter_route_contexts`), so a dependency given
    where a router is included counts, and one given nowhere is found.
    """

    found = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if not isinstance(route, APIRoute | APIWebSocketRoute) or context.path in PUBLIC:
            continue
        if require_token not in set(calls(context.dependant)):
            found.append(f"{','.join(sorted(context.methods or ()))} {context.path}")
    return found


def test_census_every_route_but_healthz_needs_the_token(tmp_path: Path) -> None:
    app = create_app(Home(tmp_path / "census"), Config())
    try:
        paths = {context.path for context in iter_route_contexts(app.routes)}
        assert {"/healthz", "/api/sessions", "/api/sessions/{key}/messages",
                "/api/runs/{run_id}", "/api/sessions/{key}/events"} <= paths
        assert unprotected_routes(app) == []

        # the positive control: a route planted without the token is found; one that gets
        # require_token through another dependency is not
        def guarded(_: None = Depends(require_token)) -> None:
            return None

        app.add_api_route("/api/leak", lambda: {})
        app.add_api_route("/api/nested", lambda: {}, dependencies=[Depends(guarded)])
        assert unprotected_routes(app) == ["GET /api/leak"]
    finally:
        app.state.engine.db.close()


def thread_hops(app: FastAPI) -> list[str]:
    """Every route whose endpoint or dependency (at any depth) is not a coroutine function:
    FastAPI runs such a one on a worker thread, a thread hop on every request."""
    found = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if not isinstance(route, APIRoute | APIWebSocketRoute):
            continue
        called = [route.endpoint, *calls(context.dependant)]
        found += [f"{context.path}: {getattr(call, '__qualname__', call)}" for call in called
                  if call is not None and not inspect.iscoroutinefunction(call)]
    return found


def test_census_no_route_hops_to_a_worker_thread(tmp_path: Path) -> None:
    app = create_app(Home(tmp_path / "census"), Config())
    try:
        assert thread_hops(app) == []

        def planted(request: Request) -> None:  # the positive control: a sync dependency
            return None

        async def endpoint() -> dict[str, str]:
            return {}

        app.add_api_route("/api/planted", endpoint, dependencies=[Depends(planted)])
        assert thread_hops(app) == [
            "/api/planted: test_census_no_route_hops_to_a_worker_thread.<locals>.planted"]
    finally:
        app.state.engine.db.close()


def routes_without_a_permission(app: FastAPI) -> list[str]:
    """Every route (method and path) the one table of route → permission does not name."""
    found = []
    for context in iter_route_contexts(app.routes):
        if not isinstance(context.original_route, APIRoute | APIWebSocketRoute):
            continue
        for method in sorted(context.methods or {"GET"}):
            if permission_of(method, context.path) is None:
                found.append(f"{method} {context.path}")
    return found


def test_census_every_route_is_in_the_permission_table(tmp_path: Path) -> None:
    app = create_app(Home(tmp_path / "census"), Config())
    try:
        assert routes_without_a_permission(app) == []
        # the positive control: a planted route missing from the table is found
        app.add_api_route("/api/planted/{key}", lambda key: {}, methods=["POST"])
        assert routes_without_a_permission(app) == ["POST /api/planted/{key}"]
    finally:
        app.state.engine.db.close()


def first_segments(routers: Any) -> set[str]:
    """The first path segment of every route the given routers serve."""
    return {route.path.split("/")[1] for router in routers for route in router.routes}


def shared_first_segments(api: Any, pages: Any) -> set[str]:
    return first_segments(api) & first_segments(pages)


def test_the_api_found_first_can_never_take_a_pages_path() -> None:
    """create_app includes the API before the pages (a turn's requests are found sooner);
    that is safe only while no API path shares its first segment with a page's."""
    from hearth.web import app as web_app
    from hearth.web.api import openai as openai_api, slack as slack_api, webhook as webhook_api

    api = [m.router for m in (*web_app.PROTECTED_API, openai_api, webhook_api, slack_api)]
    pages = [web_app.dashboard.public, *(m.pages for m in web_app.PAGES)]
    assert shared_first_segments(api, pages) == set()
    planted = APIRouter()  # the positive control: a page under /api
    planted.add_api_route("/api/planted-page", lambda: None)
    assert shared_first_segments(api, [*pages, planted]) == {"api"}
