"""One-time sign-in links (`hearth token --link`), end to end: the command makes the link in the
gateway's store (a process of its own, as a user runs it), a browser opening it over real HTTP
is signed in as the token's form signs it in, once; a used, expired, unknown or mistyped link
is the sign-in page saying so, never a 500; two openings at once sign in one browser; the code
is never kept, in any row or byte of the database."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from pathlib import Path

import httpx
import pytest

from hearth.engine.access.signin_links import KEPT_SECONDS, LINK_SECONDS
from hearth.engine.compose import make_signin_link
from hearth.home import Home
from hearth.web.http import signin
from tests.gateway import Gateway
from tests.support.cli import hearth
from tests.support.store import db_rows

LINK = re.compile(r"^(http://\S+)/signin/link/(\S+)$", re.M)


def made_by_the_command(gateway: Gateway) -> tuple[str, str]:
    """`hearth token --link --url <gateway>` run as a user runs it: the link's path and code."""
    done = hearth("token", "--link", "--url", gateway.url, home=gateway.home)
    assert done.returncode == 0, done.stderr
    found = LINK.search(done.stdout)
    assert found and found.group(1) == gateway.url, done.stdout
    return f"/signin/link/{found.group(2)}", found.group(2)


def browser(gateway: Gateway) -> httpx.Client:
    """A browser of its own (its own cookies), that does not follow redirects."""
    return httpx.Client(base_url=gateway.url, follow_redirects=False, timeout=20)


def test_a_link_signs_one_browser_in_once(gateway: Gateway) -> None:
    path, _code = made_by_the_command(gateway)
    with browser(gateway) as phone, browser(gateway) as other:
        opened = phone.get(path)
        assert opened.status_code == 303 and opened.headers["location"] == "/"
        set_cookie = opened.headers["set-cookie"].lower()
        assert set_cookie.startswith(f"{signin.COOKIE}=")
        assert "httponly" in set_cookie and "samesite=strict" in set_cookie
        assert opened.headers["cache-control"] == "no-store"
        front = phone.get("/")
        assert front.status_code == 200, front.headers  # the dashboard, not the sign-in page
        assert 'action="/login"' not in front.text
        again = other.get(path)
        assert again.status_code == 410
        assert "This sign-in link was used already" in again.text
        assert 'action="/login"' in again.text  # the normal sign-in, offered
        assert "set-cookie" not in again.headers
        assert other.get("/").headers["location"] == "/login"  # nothing signed it in
        assert phone.get(path).status_code == 410  # nor again the browser it signed in
    assert len(db_rows(gateway, "SELECT key FROM signins")) == 1


def test_an_expired_link_signs_nobody_in(gateway: Gateway) -> None:
    """Made (by the command's own function) longer ago than a link lives: no sleeping."""
    code = make_signin_link(Home(gateway.home), at=time.time() - LINK_SECONDS - 1)
    with browser(gateway) as phone:
        opened = phone.get(f"/signin/link/{code}")
        assert opened.status_code == 410
        assert "This sign-in link has expired" in opened.text
        assert 'action="/login"' in opened.text and "set-cookie" not in opened.headers
        assert phone.get("/").headers["location"] == "/login"
    assert db_rows(gateway, "SELECT key FROM signins") == []


def test_a_link_just_inside_its_ten_minutes_still_signs_in(gateway: Gateway) -> None:
    code = make_signin_link(Home(gateway.home), at=time.time() - LINK_SECONDS + 30)
    with browser(gateway) as phone:
        assert phone.get(f"/signin/link/{code}").status_code == 303


@pytest.mark.parametrize("code", ["A" * 22, "not-a-link", "x" * 300, "%00", "é" * 22])
def test_an_unknown_or_mistyped_link_is_the_sign_in_page_saying_so(
        gateway: Gateway, code: str) -> None:
    with browser(gateway) as phone:
        opened = phone.get(f"/signin/link/{code}")
    assert opened.status_code == 404, opened.text
    assert "This is not a sign-in link of this gateway" in opened.text
    assert 'action="/login"' in opened.text and "set-cookie" not in opened.headers


def test_two_openings_at_once_sign_in_one_browser(gateway: Gateway) -> None:
    code = make_signin_link(Home(gateway.home))
    start = threading.Barrier(6)
    statuses: list[int] = []

    def open_it() -> None:
        with browser(gateway) as phone:
            start.wait()
            statuses.append(phone.get(f"/signin/link/{code}").status_code)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(statuses) == [303, 410, 410, 410, 410, 410]
    assert len(db_rows(gateway, "SELECT key FROM signins")) == 1


def test_the_code_is_never_kept_only_its_hash(gateway: Gateway) -> None:
    path, code = made_by_the_command(gateway)
    with browser(gateway) as phone:
        assert phone.get(path).status_code == 303
    (row,) = db_rows(gateway, "SELECT * FROM signin_links")
    key, _created, _expires, used_at = row
    assert key == hashlib.sha256(f"hearth-signin-link:{code}".encode()).hexdigest()
    assert code not in repr(row) and used_at is not None
    for kept in sorted(Path(gateway.home).glob("hearth.db*")):  # the file, its -wal
        assert code.encode() not in kept.read_bytes(), kept.name


def test_links_expired_a_while_are_pruned_when_another_is_made(gateway: Gateway) -> None:
    home = Home(gateway.home)
    long_ago = make_signin_link(home, at=time.time() - LINK_SECONDS - KEPT_SECONDS - 1)
    lately = make_signin_link(home, at=time.time() - LINK_SECONDS - 1)
    assert len(db_rows(gateway, "SELECT key FROM signin_links")) == 2  # none pruned yet
    made_by_the_command(gateway)
    assert len(db_rows(gateway, "SELECT key FROM signin_links")) == 2  # the new one, "lately"
    with browser(gateway) as phone:
        assert phone.get(f"/signin/link/{long_ago}").status_code == 404  # forgotten
        assert phone.get(f"/signin/link/{lately}").status_code == 410  # still says expired
