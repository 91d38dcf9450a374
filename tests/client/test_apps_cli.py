"""`hearth apps add|list|revoke` as a user runs it: the command in a subprocess against a real
gateway; the token printed once works at once, and is refused once revoked."""

from __future__ import annotations

import re
from pathlib import Path

from tests.gateway import Gateway
from tests.support.cli import hearth


def test_apps_round_trip_through_the_cli(gateway: Gateway, home: Path) -> None:
    url = ("--url", gateway.url)
    added = hearth("apps", "add", "notes-bot", "--allow", "read_chats", "--allow",
                   "send_messages", *url, home=home)
    assert added.returncode == 0, added.stderr
    assert "shown only now" in added.stdout
    token = re.search(r"hearth_app_\S+", added.stdout)
    assert token is not None
    app = gateway.client(token.group(0))
    made = app.http.post("/api/sessions", json={})
    assert made.status_code == 201 and made.json()["created_by_app"] == "notes-bot"

    listed = hearth("apps", "list", *url, home=home, extra_env={"COLUMNS": "200"})
    assert listed.returncode == 0, listed.stderr
    assert "notes-bot" in listed.stdout and "read_chats, send_messages" in listed.stdout
    assert "no limit" in listed.stdout
    assert token.group(0) not in listed.stdout  # never shown again

    again = hearth("apps", "add", "notes-bot", "--allow", "admin", *url, home=home)
    assert again.returncode == 1 and "already" in again.stderr
    wrong = hearth("apps", "add", "other", "--allow", "everything", *url, home=home)
    assert wrong.returncode == 1 and "read_chats" in wrong.stderr

    revoked = hearth("apps", "revoke", "notes-bot", *url, home=home)
    assert revoked.returncode == 0 and "Revoked the app notes-bot" in revoked.stdout
    assert app.http.get("/api/sessions").status_code == 401
    gone = hearth("apps", "revoke", "nobody", *url, home=home)
    assert gone.returncode == 1 and "no app named" in gone.stderr
    down = hearth("apps", "list", "--url", "http://127.0.0.1:9", home=home)
    assert down.returncode == 3 and "Cannot reach the Hearth gateway" in down.stderr


def test_an_apps_limit_given_at_its_making_is_kept_and_a_bad_one_refused(
        gateway: Gateway, home: Path) -> None:
    url = ("--url", gateway.url)
    added = hearth("apps", "add", "thrifty", "--allow", "send_messages", "--limit", "0.50/day",
                   "--limit", "$10/month", *url, home=home)
    assert added.returncode == 0, added.stderr
    assert "It may spend $0.5 a day and $10 a month" in added.stdout
    limits = gateway.client().http.get("/api/limits").json()
    assert limits["limits"]["apps"]["thrifty"] == {"usd_per_day": 0.5, "usd_per_month": 10.0}
    assert {(r["kind"], r["name"], r["period"]) for r in limits["standing"]} >= {
        ("app", "thrifty", "day"), ("app", "thrifty", "month")}
    [shown] = gateway.client().http.get("/api/apps").json()["apps"]
    assert shown["limits"] == {"usd_per_day": 0.5, "usd_per_month": 10.0}
    listed = hearth("apps", "list", *url, home=home, extra_env={"COLUMNS": "200"})
    assert "$0.5 a day and $10 a month" in listed.stdout, listed.stdout
    for bad in ("5", "0.5/week", "-1/day", "lots/day"):
        refused = hearth("apps", "add", "spendy", "--allow", "send_messages", "--limit", bad,
                         *url, home=home)
        assert refused.returncode == 2 and "0.50/day" in refused.stderr, (bad, refused.stderr)
    assert "spendy" not in gateway.client().http.get("/api/limits").text
