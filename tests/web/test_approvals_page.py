"""The Approvals page's routes over HTTP (an in-process gateway, httpx as the browser): the page
lists what waits newest first and the standing grants; `POST /approvals/{id}` answers a call
and comes back to the page; `POST /grants/{id}/revoke` revokes a grant; and what is refused
(no such approval or grant, an answer given twice, a bad decision or scope, Always in a chat
that keeps nothing, a missing CSRF token) comes back as the page with its sentence and the
refusal's status, never a 500 and never JSON. (The browser is driven in
tests/browser/test_approvals_memory.py.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hearth.web.http import signin
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import TOKEN, Api, Gateway
from tests.support.approvals import pending_in

HTML = {"Accept": "text/html"}  # as a browser's form post asks


class Browser:
    """A signed-in browser's view of the gateway: its cookie and the page's CSRF token."""

    def __init__(self, gateway: Gateway) -> None:
        self.http = httpx.Client(base_url=gateway.url, follow_redirects=False, timeout=30,
                                 headers=HTML)
        assert self.http.post("/login", data={"token": TOKEN}).status_code == 303
        self.csrf = signin.csrf_for(TOKEN, self.http.cookies[signin.COOKIE])

    def page(self) -> str:
        answer = self.http.get("/approvals")
        assert answer.status_code == 200, answer.text
        return answer.text

    def post(self, path: str, **form: str) -> httpx.Response:
        return self.http.post(path, data={"csrf": self.csrf, **form})


@pytest.fixture
def setup(gateway: Gateway) -> Iterator[tuple[Api, Browser]]:
    api, browser = gateway.client(), Browser(gateway)
    yield api, browser
    browser.http.close()
    api.http.close()


def ask(api: Api, server: ScriptedModelServer, path: str,
        **chat: Any) -> tuple[str, str, dict[str, Any]]:
    """A chat whose turn waits on a write of `path`: its key, the run, the approval."""
    key = api.new_chat(trust="ask", **chat)
    server.push(Reply(tool_calls=[Call("write_file", {"path": path, "content": "x"})]))
    run_id = str(api.send(key, f"write {path}")["run_id"])
    return key, run_id, pending_in(api, key)


def refused_page(answer: httpx.Response, status: int, sentence: str) -> str:
    """The Approvals page drawn again with the refusal's sentence, at its status."""
    assert answer.status_code == status, (answer.status_code, answer.text[:500])
    assert answer.headers["content-type"].startswith("text/html")
    assert '<h1 class="page-title">Approvals</h1>' in answer.text
    alert = re.search(r'<p class="error" role="alert">(.*?)</p>', answer.text, re.S)
    assert alert is not None and sentence in alert.group(1), answer.text[:2000]
    return answer.text


def test_the_page_says_what_each_section_is_for_when_empty(
        setup: tuple[Api, Browser]) -> None:
    _, browser = setup
    page = browser.page()
    assert "Nothing is waiting on you" in page and "No standing grants" in page
    assert 'href="/approvals" aria-current="page"' in page
    assert "style=" not in page and " onclick" not in page  # the CSP allows neither


def test_the_page_needs_sign_in(gateway: Gateway) -> None:
    with httpx.Client(base_url=gateway.url, follow_redirects=False, headers=HTML) as anon:
        assert anon.get("/approvals").headers["location"] == "/login"
        assert anon.post("/approvals/x", data={"decision": "deny"}).status_code == 401
        assert anon.post("/grants/1/revoke").status_code == 401


def test_what_waits_is_listed_newest_first_and_answered_from_the_page(
        setup: tuple[Api, Browser], model_server: ScriptedModelServer) -> None:
    api, browser = setup
    older_key, older_run, older = ask(api, model_server, "older.md")
    newer_key, newer_run, newer = ask(api, model_server, "newer.md")
    page = browser.page()
    cards = re.findall(r'<article class="card ask-card" id="approval-([^"]+)"', page)
    assert cards == [newer["id"], older["id"]]
    assert f'action="/approvals/{newer["id"]}"' in page  # this page's route, not the chat's
    assert f'action="/chats/{newer_key}/approvals/' not in page
    assert f'href="/chats/{newer_key}"' in page and "write newer.md" in page  # its chat
    answered = browser.post(f"/approvals/{newer['id']}", decision="allow_once")
    assert answered.status_code == 303
    assert answered.headers["location"] == "/approvals?done=allow_once"
    assert api.wait(newer_run)["status"] == "complete"
    after = browser.http.get(answered.headers["location"]).text
    assert "Allowed once." in after and newer["id"] not in after and older["id"] in after
    assert browser.post(f"/approvals/{older['id']}", decision="deny").status_code == 303
    assert api.wait(older_run)["status"] == "complete"
    assert older_key != newer_key


def test_always_with_a_scope_leaves_a_grant_the_page_revokes(
        setup: tuple[Api, Browser], model_server: ScriptedModelServer) -> None:
    api, browser = setup
    key, run_id, approval = ask(api, model_server, "docs/a.md")
    answered = browser.post(f"/approvals/{approval['id']}", decision="allow_always",
                            scoped="on", prefix="docs/")
    assert answered.headers["location"] == "/approvals?done=allow_always"
    assert api.wait(run_id)["status"] == "complete"
    [grant] = api.http.get("/api/grants").json()["grants"]
    assert (grant["tool"], grant["prefix"], grant["session"]) == ("write_file", "docs/", key)
    page = browser.page()
    assert "targets starting with <code>docs/</code>" in page
    assert f'action="/grants/{grant["id"]}/revoke"' in page and f'href="/chats/{key}"' in page
    revoked = browser.post(f"/grants/{grant['id']}/revoke")
    assert revoked.status_code == 303
    assert revoked.headers["location"] == "/approvals?done=revoked#grants"
    assert api.http.get("/api/grants").json()["grants"] == []
    again = browser.post(f"/grants/{grant['id']}/revoke")
    refused_page(again, 404, f"There is no standing grant {grant['id']}.")


@pytest.mark.parametrize("approval_id", ["no-such-approval", "0" * 32, "x" * 300])
def test_an_unknown_approval_is_a_page_saying_so(setup: tuple[Api, Browser],
                                                  approval_id: str) -> None:
    _, browser = setup
    answer = browser.post(f"/approvals/{approval_id}", decision="allow_once")
    refused_page(answer, 404, "There is no such approval")


@pytest.mark.parametrize("grant_id", ["999", str(2**62)])
def test_an_unknown_grant_is_a_page_saying_so(setup: tuple[Api, Browser], grant_id: str) -> None:
    _, browser = setup
    refused_page(browser.post(f"/grants/{grant_id}/revoke"), 404,
                 f"There is no standing grant {grant_id}.")


@pytest.mark.parametrize("grant_id", ["abc", "0", "-1", str(2**62 + 1), "9" * 40, "1e3"])
def test_an_id_no_grant_could_have_is_a_page_saying_so(setup: tuple[Api, Browser],
                                                        grant_id: str) -> None:
    _, browser = setup
    refused_page(browser.post(f"/grants/{grant_id}/revoke"), 404,
                 f"There is no standing grant {grant_id}.")


@pytest.mark.parametrize("form", [{}, {"decision": "maybe"}, {"decision": "ALLOW_ONCE"},
                                  {"decision": "allow_always", "scoped": "on", "prefix": " "},
                                  {"decision": "allow_always", "scoped": "on",
                                   "prefix": "x" * 501}])
def test_a_bad_decision_or_scope_is_422_and_the_call_still_waits(
        setup: tuple[Api, Browser], model_server: ScriptedModelServer,
        form: dict[str, str]) -> None:
    api, browser = setup
    key, run_id, approval = ask(api, model_server, "a.md")
    answer = browser.post(f"/approvals/{approval['id']}", **form)
    sentence = "decision must be one of" if "prefix" not in form else "The scope of Always"
    refused_page(answer, 422, sentence)
    assert pending_in(api, key)["id"] == approval["id"]  # not answered
    assert browser.post(f"/approvals/{approval['id']}", decision="deny").status_code == 303
    assert api.wait(run_id)["status"] == "complete"


def test_an_answer_given_twice_is_a_page_saying_so(
        setup: tuple[Api, Browser], model_server: ScriptedModelServer) -> None:
    api, browser = setup
    _, run_id, approval = ask(api, model_server, "a.md")
    assert browser.post(f"/approvals/{approval['id']}", decision="deny").status_code == 303
    assert api.wait(run_id)["status"] == "complete"
    again = browser.post(f"/approvals/{approval['id']}", decision="allow_once")
    refused_page(again, 409, "cannot be answered again")


def test_always_is_not_offered_nor_taken_in_a_chat_that_keeps_nothing(
        setup: tuple[Api, Browser], model_server: ScriptedModelServer) -> None:
    api, browser = setup
    _, run_id, approval = ask(api, model_server, "a.md", memory_mode="incognito")
    card = browser.page().split(f'id="approval-{approval["id"]}"', 1)[1].split("</article>")[0]
    assert 'value="allow_once"' in card and 'value="allow_always"' not in card
    answer = browser.post(f"/approvals/{approval['id']}", decision="allow_always")
    assert answer.status_code == 403 and "Approvals" in answer.text
    assert api.http.get("/api/grants").json()["grants"] == []
    assert browser.post(f"/approvals/{approval['id']}", decision="deny").status_code == 303
    assert api.wait(run_id)["status"] == "complete"


def test_the_forms_need_the_csrf_token(setup: tuple[Api, Browser],
                                       model_server: ScriptedModelServer) -> None:
    api, browser = setup
    key, run_id, approval = ask(api, model_server, "a.md")
    for form in ({"decision": "allow_once"}, {"decision": "allow_once", "csrf": "forged"}):
        refused = browser.http.post(f"/approvals/{approval['id']}", data=form)
        assert refused.status_code == 403
    assert browser.http.post("/grants/1/revoke", data={}).status_code == 403
    assert pending_in(api, key)["id"] == approval["id"]
    assert browser.post(f"/approvals/{approval['id']}", decision="deny").status_code == 303
    assert api.wait(run_id)["status"] == "complete"

