"""The delivery desk over HTTP: `GET /api/desk` lists the failed and unknown deliveries and the
owed chores; Retry, Mark delivered and Drop settle a delivery, Retry and Drop an owed chore;
each action is audited once (no message text) and refused with a sentence where it does not
apply; the sidebar counts what needs the owner; and the Not delivered page's form posts.

End to end, a reply Telegram refused is listed, sent again by the channel's own sender on
Retry (exactly once, a second Retry refused while the first is on its way), and leaves the
list. The rest seeds the ledger of an in-process dashboard (no channel set up) directly."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from hearth.store import deliveries, owed_chores
from hearth.store.owed_chores import OwedRow
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.fakes.telegram_server import FakeTelegram
from tests.gateway import Gateway
from tests.support.dashboard import api_chat, bearer, dashboard, store_of
from tests.support.http import error_of
from tests.support.polling import until
from tests.support.store import audit_rows, db_rows
from tests.support.telegram import OWNER, chats, telegram_config

SECRET_WORDS = "the launch code is swordfish"  # the text of a delivery: never in an audit row
BADGE = re.compile(r'<a href="/desk"[^>]*>.*?(?:<span class="count" aria-label="(\d+) need '
                   r'you">\d+</span>)?</a>', re.S)


# ---------------------------------------------------------------- end to end, on Telegram


def desk_of(http: Any) -> dict[str, Any]:
    answer = http.get("/api/desk")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_a_refused_reply_is_listed_retried_once_and_delivered(
        telegram: FakeTelegram, gateway_factory: Callable[..., Gateway],
        model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="Here is your answer."))
    telegram.fail("sendMessage", 403, "Forbidden: bot was blocked by the user")
    gateway = gateway_factory(config=telegram_config(telegram))
    api = gateway.client()
    telegram.push_message(OWNER, OWNER, "hello bot")
    listed = until(lambda: desk_of(api.http)["deliveries"], what="the refused reply listed")
    [failed] = listed
    [chat] = chats(api)
    assert failed["state"] == "failed" and failed["channel"] == "telegram"
    assert failed["thread"] == str(OWNER) and failed["chat"]["key"] == chat["key"]
    assert "blocked" in failed["why"] and failed["preview"] == "Here is your answer."
    assert telegram.sent(OWNER) == [] and desk_of(api.http)["needs_owner"] == 1

    held = telegram.hold("sendMessage")
    answer = api.http.post(f"/api/deliveries/{failed['id']}/retry")
    assert answer.status_code == 202, answer.text
    assert held.wait_arrived(1), "the retry never reached Telegram"
    again = api.http.post(f"/api/deliveries/{failed['id']}/retry")
    error_of(again, 409, "delivery_pending", "wait until it settles")
    error_of(api.http.post(f"/api/deliveries/{failed['id']}/drop"), 409, "delivery_pending")
    assert desk_of(api.http)["deliveries"] == []  # on its way: not the owner's to settle now
    held.release()
    [sent] = telegram.wait_sent(1, chat_id=OWNER)
    assert sent.plain == "Here is your answer."
    until(lambda: db_rows(gateway, "SELECT status FROM deliveries WHERE id = ?",
                          failed["id"]) == [("sent",)], what="the row recorded sent")
    time.sleep(0.3)  # a second send, if one were coming, would have gone by now
    assert len(telegram.sent(OWNER)) == 1
    [retried] = audit_rows(gateway.home, "delivery.retried")
    assert retried["detail"] == {"delivery_id": failed["id"], "channel": "telegram",
                                 "thread": str(OWNER), "was": "failed", "attempts": 1}
    error_of(api.http.post(f"/api/deliveries/{failed['id']}/retry"), 409, "delivery_settled",
             "delivered")


# ---------------------------------------------------------------- in process, seeded


@pytest.fixture
def desk(home: Path) -> Iterator[TestClient]:
    """The dashboard in process, the API's bearer token on every request."""
    with dashboard(home) as client:
        client.headers.update(bearer(client))
        yield client


def owe_delivery(client: TestClient, key: str, status: str, *, channel: str = "telegram",
                 text: str = SECRET_WORDS) -> int:
    """A delivery of chat `key` in `status` (failed or unknown), as the channel left it."""
    with store_of(client).write() as conn:
        [row] = deliveries.owe(conn, key, channel, "111", "reply", [text])
        deliveries.attempting(conn, row.id)
        (deliveries.failed if status == "failed" else deliveries.unknown)(
            conn, row.id, "Telegram refused it (Forbidden)")
    return row.id


def owe_chore(client: TestClient, key: str, kind: str, *, attempts: int,
              next_at: float) -> OwedRow:
    with store_of(client).write() as conn:
        return owed_chores.owe(conn, kind, key, None, attempts=attempts, next_at=next_at)


def chore_ids(client: TestClient) -> list[int]:
    return [c["id"] for c in desk_of(client)["chores"]]


def test_the_desk_lists_failed_and_unknown_deliveries_only(desk: TestClient) -> None:
    key = api_chat(desk)
    assert desk.patch(f"/api/sessions/{key}", json={"title": "Travel plans"}).status_code == 200
    failed = owe_delivery(desk, key, "failed")
    unknown = owe_delivery(desk, key, "unknown", text="x" * 400)
    with store_of(desk).write() as conn:  # neither sent nor owed rows are the owner's to settle
        sent, owed = deliveries.owe(conn, key, "telegram", "111", "reply", ["a", "b"])
        deliveries.sent(conn, sent.id, "m-1")
    found = desk_of(desk)
    assert [d["id"] for d in found["deliveries"]] == [unknown, failed]  # latest first
    first = found["deliveries"][0]
    assert first["state"] == "unknown" and first["chat"] == {"key": key, "name": "Travel plans"}
    assert len(first["preview"]) == 160 and first["preview"].endswith("…")
    assert first["at"] and first["attempts"] == 1 and first["why"].startswith("Telegram")
    assert found["needs_owner"] == 2 and owed.id not in [d["id"] for d in found["deliveries"]]


def test_mark_delivered_and_drop_settle_once_and_are_audited_without_text(
        desk: TestClient, home: Path) -> None:
    key = api_chat(desk)
    marked, dropped = owe_delivery(desk, key, "unknown"), owe_delivery(desk, key, "failed")
    answer = desk.post(f"/api/deliveries/{marked}/delivered")
    assert answer.status_code == 200 and answer.json()["delivery"]["state"] == "sent"
    assert desk.post(f"/api/deliveries/{dropped}/drop").json()["delivery"]["state"] == "dropped"
    with store_of(desk).read() as conn:
        row, gone = deliveries.get(conn, marked), deliveries.get(conn, dropped)
    assert row is not None and row.status == "sent" and "Marked delivered" in str(row.error)
    assert gone is not None and gone.status == "dropped" and gone.text == SECRET_WORDS
    assert desk_of(desk)["deliveries"] == []
    error_of(desk.post(f"/api/deliveries/{marked}/drop"), 409, "delivery_settled",
             "was delivered already")
    error_of(desk.post(f"/api/deliveries/{dropped}/delivered"), 409, "delivery_settled",
             "was dropped already")
    error_of(desk.post(f"/api/deliveries/{dropped}/retry"), 409, "delivery_settled")
    [note] = audit_rows(home, "delivery.marked_delivered")
    [drop] = audit_rows(home, "delivery.dropped")
    assert note["detail"]["was"] == "unknown" and drop["detail"]["delivery_id"] == dropped
    assert note["session_key"] == key and SECRET_WORDS not in str(note) + str(drop)


def test_a_retry_on_a_channel_not_set_up_is_refused_and_changes_nothing(
        desk: TestClient, home: Path) -> None:
    failed = owe_delivery(desk, api_chat(desk), "failed", channel="webhook")
    error_of(desk.post(f"/api/deliveries/{failed}/retry"), 409, "channel_not_set_up",
             "webhook", "drop it")
    assert [d["state"] for d in desk_of(desk)["deliveries"]] == ["failed"]
    assert audit_rows(home, "delivery.retried") == []


@pytest.mark.parametrize(("path", "status", "code"), [
    ("/api/deliveries/999/retry", 404, "delivery_not_found"),
    ("/api/deliveries/999/delivered", 404, "delivery_not_found"),
    ("/api/deliveries/999/drop", 404, "delivery_not_found"),
    ("/api/chores/999/retry", 404, "chore_not_found"),
    ("/api/chores/999/drop", 404, "chore_not_found"),
    ("/api/deliveries/0/drop", 422, "invalid_request"),
    ("/api/deliveries/abc/retry", 422, "invalid_request"),
    (f"/api/chores/{2**63}/drop", 422, "invalid_request"),
    ("/api/deliveries/1/resend", 404, None),
    ("/api/chores/1/delivered", 404, None),
])
def test_a_bad_id_or_action_is_the_envelope_never_a_500(
        desk: TestClient, path: str, status: int, code: str | None) -> None:
    error_of(desk.post(path), status, code)


def test_a_chore_made_due_is_tried_by_the_chore_loop(desk: TestClient, home: Path) -> None:
    key = api_chat(desk)
    later = time.time() + 3600
    title = owe_chore(desk, key, "title", attempts=4, next_at=later)
    time.sleep(0.2)
    assert chore_ids(desk) == [title.id]  # not due for an hour: untouched by the loop
    answer = desk.post(f"/api/chores/{title.id}/retry")
    assert answer.status_code == 202 and answer.json()["chore"] == {
        "id": title.id, "kind": "title", "state": "due"}
    until(lambda: chore_ids(desk) == [], what="the chore tried (no model: nothing owed)")
    [row] = audit_rows(home, "chore.retried")
    assert row["detail"] == {"chore_id": title.id, "kind": "title", "attempts": 4}


def test_a_second_chore_retry_is_refused_while_it_is_due(desk: TestClient) -> None:
    key = api_chat(desk)  # a kind no doer takes: the loop leaves it due, as a busy one would
    chore = owe_chore(desk, key, "archive", attempts=1, next_at=time.time() + 3600)
    assert desk.post(f"/api/chores/{chore.id}/retry").status_code == 202
    [listed] = desk_of(desk)["chores"]
    assert listed["next_at"] is not None and listed["needs_owner"] is False
    error_of(desk.post(f"/api/chores/{chore.id}/retry"), 409, "chore_due", "due now already")


def test_a_dropped_chore_is_gone_for_good(desk: TestClient, home: Path) -> None:
    key = api_chat(desk)
    chore = owe_chore(desk, key, "learning", attempts=5, next_at=time.time() + 3600)
    answer = desk.post(f"/api/chores/{chore.id}/drop")
    assert answer.status_code == 200 and answer.json()["chore"]["state"] == "dropped"
    assert chore_ids(desk) == []
    error_of(desk.post(f"/api/chores/{chore.id}/drop"), 404, "chore_not_found")
    error_of(desk.post(f"/api/chores/{chore.id}/retry"), 404, "chore_not_found")
    [row] = audit_rows(home, "chore.dropped")
    assert row["session_key"] == key and row["detail"]["kind"] == "learning"


def badge(page: str) -> int:
    found = BADGE.search(page)
    assert found is not None, "no Not delivered link in the sidebar"
    return int(found.group(1) or 0)


def test_the_sidebar_counts_what_needs_the_owner(home: Path) -> None:
    with dashboard(home, csrf=True) as client:
        assert badge(client.get("/desk").text) == 0
        key = api_chat(client)
        owe_delivery(client, key, "failed")
        unknown = owe_delivery(client, key, "unknown")
        owe_chore(client, key, "title", attempts=3, next_at=time.time() + 3600)
        owe_chore(client, key, "learning", attempts=2, next_at=time.time() + 3600)  # not yet
        assert badge(client.get("/approvals").text) == 3
        done = client.post(f"/desk/deliveries/{unknown}/drop")
        assert done.status_code == 303 and done.headers["location"] == "/desk?done=drop"
        page = client.get("/desk?done=drop").text
        assert badge(page) == 2 and "Dropped. It will not be sent." in page


def test_the_page_says_what_is_refused_with_its_status(home: Path) -> None:
    with dashboard(home, csrf=True) as client:
        page = client.get("/desk").text
        assert "Everything was delivered" in page and "No chores owed" in page
        gone = client.post("/desk/deliveries/77/retry")
        assert gone.status_code == 404 and "There is no delivery #77." in gone.text
        odd = client.post("/desk/chores/x1/drop")
        assert odd.status_code == 404 and "There is no owed chore #x1." in odd.text
        key = api_chat(client)
        failed = owe_delivery(client, key, "failed")
        refused = client.post(f"/desk/deliveries/{failed}/retry")
        assert refused.status_code == 409 and "not set up on this gateway" in refused.text
        assert f'id="delivery-{failed}"' in refused.text  # the list is still drawn
