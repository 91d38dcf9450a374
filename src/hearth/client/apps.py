"""`hearth apps add|list|revoke`: apps and their tokens on the running gateway, over its HTTP
API (`/api/apps`), the list as a table (rich), every refusal as the gateway's own sentence on
the error stream. A new app's token is printed once, on standard output alone, and is never
shown again (the gateway keeps only its hash).

Exit codes: 0 done, 1 the gateway refused (its sentence is shown), 3 it could not be reached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from rich.console import Console
from rich.table import Table

from hearth.client.api import GatewayApi
from hearth.client.commands import local, run_with

JSON = dict[str, Any]


class AppsApi(GatewayApi):
    """The apps routes of one gateway."""

    def apps(self) -> list[JSON]:
        return list(self._call("GET", "/api/apps").get("apps", []))

    def add_app(self, name: str, permissions: list[str], limits: JSON | None = None) -> JSON:
        body: JSON = {"name": name, "permissions": permissions}
        if limits:
            body["limits"] = limits
        return self._call("POST", "/api/apps", json=body)

    def revoke_app(self, name: str) -> JSON:
        return self._call("DELETE", f"/api/apps/{quote(name, safe='')}")



def table_of(apps: list[JSON]) -> Table:
    table = Table(title="Apps", title_justify="left")
    for name in ("Name", "Permissions", "May spend", "Created (local)", "Last used", "Revoked"):
        table.add_column(name, overflow="fold")
    for app in apps:
        table.add_row(app["name"], ", ".join(app["permissions"]),
                      spend_words(app.get("limits")) or "no limit", local(app["created_at"]),
                      local(app["last_used_at"]),
                      local(app["revoked_at"]) if app["revoked"] else "no")
    return table


def spend_words(limits: JSON | None) -> str:
    """"$0.5 a day and $10 a month" (the limits set), "" for none."""
    return " and ".join(f"${usd:g} a {key.removeprefix('usd_per_')}"
                        for key, usd in (limits or {}).items() if usd is not None)


def _with_api(base: str, token: str, work: Callable[[AppsApi, Console], None]) -> int:
    return run_with(AppsApi(base, token), work)


def run_list(base: str, token: str) -> int:
    def work(api: AppsApi, out: Console) -> None:
        apps = api.apps()
        if apps:
            out.print(table_of(apps))
        else:
            out.print("No apps. Add one with `hearth apps add NAME --allow read_chats`.",
                      markup=False)
    return _with_api(base, token, work)


class BadLimit(ValueError):
    """A `--limit` that is not AMOUNT/day or AMOUNT/month; the message says so."""


def limits_of(given: list[str]) -> JSON:
    """`["0.50/day", "10/month"]` as `{"usd_per_day": 0.5, "usd_per_month": 10.0}`."""
    limits: JSON = {}
    for text in given:
        amount, _, period = text.strip().lstrip("$").partition("/")
        try:
            usd = float(amount)
        except ValueError:
            usd = -1.0
        if period not in ("day", "month") or not usd >= 0 or usd == float("inf"):
            raise BadLimit(f"--limit {text!r} is not a limit: give US dollars per day or per "
                           "month, like 0.50/day or 10/month.")
        limits[f"usd_per_{period}"] = usd
    return limits


def run_add(base: str, token: str, name: str, permissions: list[str],
            limits: JSON | None = None) -> int:
    def work(api: AppsApi, out: Console) -> None:
        made = api.add_app(name, permissions, limits)
        app = made["app"]
        spend = spend_words(limits)
        if spend:
            out.print(f"It may spend {spend} on model calls.", markup=False, highlight=False)
        out.print(f"Made the app {app['name']} ({', '.join(app['permissions'])}). Its token, "
                  "shown only now (the gateway keeps only its hash; revoke the app and add "
                  "another if it is lost):", markup=False, highlight=False)
        out.print(made["token"], markup=False, highlight=False)
    return _with_api(base, token, work)


def run_revoke(base: str, token: str, name: str) -> int:
    def work(api: AppsApi, out: Console) -> None:
        api.revoke_app(name)
        out.print(f"Revoked the app {name}: its token is refused from now on (its chats stay).",
                  markup=False, highlight=False)
    return _with_api(base, token, work)
