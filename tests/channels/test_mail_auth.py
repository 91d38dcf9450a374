"""Reading Authentication-Results (channels/mail_auth.py) as RFC 8601 writes it: only the
named server's header, only a pass aligned with the From domain, and what a comment or a
quoted string says is never read as a result (a search for "dkim=pass" would). Each case is
one a looser reading gets wrong."""

from __future__ import annotations

import time

import pytest

from hearth.channels.mail_auth import aligned, parse_results, proving
from hearth.channels.mail_reading import parse
from tests.fakes.mail_server import mail

ID = "mx.example.org"
ME = "me@example.org"


def _proves(*headers: str, sender: str = ME, authserv_id: str | None = ID) -> str | None:
    return proving(headers, authserv_id, sender)


@pytest.mark.parametrize("header", [
    f"{ID}; dkim=fail (dkim=pass header.d=example.org) header.d=example.org",
    f"{ID}; dkim=fail (a (nested) dkim=pass header.d=example.org) header.d=example.org",
    f'{ID}; dkim=fail reason="dkim=pass header.d=example.org; spf=pass" header.d=example.org',
    f"{ID}; dkim=pass header.d=evil.example.net header.i=@example.org",
    f"{ID}; dkim=pass header.d=example.org header.d=evil.example.net",
    f"{ID}; dkim=pass header.d=a.example.org",  # for b.example.org below
    f"{ID}; spf=pass smtp.helo=example.org",
    f"{ID}; dmarc=pass header.from=mail.example.org",
    f"{ID}; dkim=pass",
    f"{ID}; none",
    f"(added by) {ID}; dkim=pass header.d=example.org",
    f'"{ID}"; dkim=pass header.d=example.org',
    "MX.EXAMPLE.ORG; dkim=pass header.d=example.org",
    f"{ID}.evil.example; dkim=pass header.d=example.org",
    f"{ID}; dkim=pass (unclosed header.d=example.org",
    f"{ID}; dkim=pass header.d=example.org; spf=pass smtp.mailfrom=\"x",
    "dkim=pass header.d=example.org",
])
def test_what_proves_nothing(header: str) -> None:
    sender = "me@b.example.org" if "a.example.org" in header else ME
    assert _proves(header, sender=sender) is None


@pytest.mark.parametrize(("header", "method"), [
    (f"{ID}; dkim=pass header.d=example.org", "dkim"),
    (f"{ID} 1; DKIM=Pass (2048-bit key) Header.D=Example.ORG header.s=s1", "dkim"),
    (f"{ID};\r\n\tdkim=pass header.i=me@mail.example.org", "dkim"),
    (f"{ID} (Postfix); dkim=fail header.d=example.org; spf=pass smtp.mailfrom=example.org",
     "spf"),
    (f'{ID}; spf=pass reason="a; b" smtp.mailfrom=bounce@mail.example.org', "spf"),
    (f"{ID}; dmarc=pass (p=reject dis=none) header.from=example.org", "dmarc"),
    (f"{ID}; dkim/1=pass header.d=example.org;", "dkim"),
])
def test_what_proves_the_owner(header: str, method: str) -> None:
    assert _proves(header) == method


def test_only_the_named_servers_header_counts_and_none_named_proves_nothing() -> None:
    other = "mx.evil.example; dkim=pass header.d=example.org"
    assert _proves(other, f"{ID}; dkim=fail header.d=example.org") is None
    assert _proves(other, f"{ID}; dkim=pass header.d=example.org") == "dkim"
    assert _proves(f"{ID}; dkim=pass header.d=example.org", authserv_id=None) is None


def test_alignment_is_the_domain_or_one_above_or_below_it() -> None:
    assert aligned("example.org", "example.org") and aligned("mail.example.org", "example.org")
    assert aligned("example.org", "mail.example.org") and aligned("Example.Org.", "example.org")
    assert not aligned("a.example.org", "b.example.org")
    assert not aligned("evilexample.org", "example.org") and not aligned("org", "example.org")
    assert not aligned("", "example.org")


def test_a_header_is_read_in_linear_time_and_deep_comments_do_not_overflow() -> None:
    started = time.monotonic()
    assert parse_results(f"{ID}; " + "dkim=pass " * 1500) is not None
    assert parse_results(f"{ID}; dkim=pass " + "(" * 5000 + ")" * 5000) is not None
    assert parse_results(f"{ID}; " + "x" * 100_000) is None  # longer than any server's
    assert time.monotonic() - started < 1.0


def test_a_mail_with_two_from_addresses_is_proven_by_nothing() -> None:
    """Which of them did the server check? A DMARC verifier may read the other one."""
    made = mail(ME, "hearth@example.org", "hi", message_id="<two@example.org>")
    made.replace_header("From", f"{ME}, bob@example.net")
    raw = f"Authentication-Results: {ID}; dkim=pass header.d=example.org\r\n".encode()
    assert not parse(raw + made.as_bytes(), ID).authenticated
    made.replace_header("From", ME)
    assert parse(raw + made.as_bytes(), ID).authenticated
