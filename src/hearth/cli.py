"""The `hearth` command: gateway, chat, status, export, import, backup, restore, token, db, tools,
mcp, jobs, apps.

Its help shows no type tags: a flag is shown bare (`--verbose`, not `--verbose <bool>`) and an
option that takes a value names it (`--port PORT`, not `--port <int>`), by `HearthCommand` and
`HearthGroup`, the classes every command here is made with.
"""

from __future__ import annotations

import ipaddress
import socket
import textwrap
from pathlib import Path
from typing import Annotated, Any, NoReturn
from urllib.parse import urlsplit

import typer
from typer.core import TyperCommand, TyperGroup

from hearth import __version__, settings
from hearth.config import Config, ConfigError, load_config
from hearth.extras import MissingExtra, missing_in
from hearth.home import Home, private_umask


def _named(params: list[Any]) -> list[Any]:
    """The parameters, each flag without a tag and each value named by its metavar (its own
    name in capitals when it has none)."""
    for param in params:
        if param.metavar is None:
            param.metavar = "" if getattr(param, "is_flag", False) else str(param.name).upper()
        if param.param_type_name == "argument":  # its name is its metavar: no type beside it
            param.display_type_rich = lambda ctx: None
    return params


class HearthCommand(TyperCommand):
    """A command whose help shows no type tags."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _named(super().get_params(ctx))


class HearthGroup(TyperGroup):
    """A group of commands whose help shows no type tags."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _named(super().get_params(ctx))


app = typer.Typer(help="Hearth: a local-first personal AI agent gateway.", no_args_is_help=True,
                  cls=HearthGroup)
db_app = typer.Typer(help="The database.", no_args_is_help=True, cls=HearthGroup)
app.add_typer(db_app, name="db")
tools_app = typer.Typer(help="The agent's tools.", no_args_is_help=True, cls=HearthGroup)
app.add_typer(tools_app, name="tools")
jobs_app = typer.Typer(help="Scheduled jobs, on the running gateway.", no_args_is_help=True,
                       cls=HearthGroup)
app.add_typer(jobs_app, name="jobs")
apps_app = typer.Typer(help="Apps and their tokens, on the running gateway.",
                       no_args_is_help=True, cls=HearthGroup)
app.add_typer(apps_app, name="apps")


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"hearth {__version__}")
        raise typer.Exit()


@app.callback()
def _start(
    version: Annotated[bool, typer.Option(
        "--version", help="Print Hearth's version and exit", is_eager=True,
        callback=_print_version)] = False,
) -> None:
    # before any command: whatever it writes into the home is the owner's alone (0600/0700)
    private_umask()


def _load() -> tuple[Home, Config]:
    home = Home.from_env()
    try:
        return home, load_config(home.config_file)
    except ConfigError as error:
        typer.echo(f"Hearth cannot start: {error}", err=True)
        raise typer.Exit(2) from error


@app.command(cls=HearthCommand)
def gateway(
    host: Annotated[str | None, typer.Option(
        metavar="HOST",
        help="Address to listen on (default: host in config.toml, or HEARTH_HOST)")] = None,
    port: Annotated[int | None, typer.Option(
        metavar="PORT",
        help="Port to listen on (default: port in config.toml, or HEARTH_PORT)")] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="Log every library's INFO lines too (migrations, requests)")] = False,
) -> None:
    """Run the gateway (HTTP API, dashboard, turns, live events) in the foreground."""
    from hearth.logs import set_up_logging
    from hearth.web.http.server import ListenRefused, listen

    home, config = _load()
    set_up_logging(verbose)
    bind_host = host or config.gateway.host
    bind_port = port or config.gateway.port
    try:
        sock = listen(bind_host, bind_port)
    except ListenRefused as refused:
        typer.echo(f"Hearth cannot start: {refused}", err=True)
        raise typer.Exit(2) from refused
    _serve(home, config, sock, verbose)


def _serve(home: Home, config: Config, sock: socket.socket, verbose: bool) -> None:
    from hearth.web.app import create_app
    from hearth.web.http.server import serve

    migrate_apart(home, verbose)
    application = create_app(home, config)
    host, port = sock.getsockname()[:2]

    def started() -> None:
        typer.echo(f"Hearth is serving on {_address(host, port)} — open it and sign in with "
                   "the token `hearth token` prints.", err=True)
        typer.echo(f"Home: {home.root}", err=True)
        typer.echo(f"Shell: {application.state.engine.placement.describe()}", err=True)

    serve(application, sock=sock, verbose=verbose, on_started=started)


def migrate_apart(home: Home, verbose: bool = False) -> None:
    """The home's schema made current by a child process, so the gateway never holds Alembic
    (`store/upgrade.py`)."""
    from hearth.engine.compose import MigrationFailed, upgrade_store_apart

    try:
        upgrade_store_apart(home, verbose)
    except MigrationFailed as failed:
        typer.echo(f"Hearth cannot start: {failed}.", err=True)
        raise typer.Exit(1) from failed


def _address(host: str, port: int) -> str:
    """The URL to open: an address that means "every address" is reached at this machine's."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(host, f"[{host}]" if ":" in host else host)
    return f"http://{shown}:{port}"


@app.command(cls=HearthCommand)
def token(
    link: Annotated[bool, typer.Option(
        "--link", help="Also print a one-time sign-in link (one browser, once, within 10 "
        "minutes) and its QR code, to sign a phone in without typing the token")] = False,
    url: Annotated[str | None, typer.Option(
        metavar="URL", help="With --link: the gateway's address as the phone reaches it "
        "(default: host and port in config.toml, or HEARTH_HOST and HEARTH_PORT)")] = None,
) -> None:
    """Print the gateway's bearer token (made on first use); with --link, a one-time sign-in
    link and its QR code too."""
    if url is not None and not link:
        raise typer.BadParameter("--url goes with --link.", param_hint="--url")
    if not link:
        typer.echo(Home.from_env().token())
        return
    home, config = _load()
    base = _link_base(url, config)
    typer.echo(home.token())
    _print_signin_link(home, base)


def _link_base(url: str | None, config: Config) -> str:
    """Where a sign-in link points: `--url` (an http(s) address), else the configured one."""
    if url is None:
        return _address(config.gateway.host, config.gateway.port)
    if not _is_web_address(url.strip()):
        raise typer.BadParameter(f"{url!r} is not an address like http://192.168.1.20:8765.",
                                 param_hint="--url")
    return url.strip().rstrip("/")


def _is_web_address(url: str) -> bool:
    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port > 0  # a port not a number raises
    except ValueError:
        return False
    return port_ok and parts.scheme in ("http", "https") and bool(parts.hostname)


def _print_signin_link(home: Home, base: str) -> None:
    from hearth.client.qr import qr_lines
    from hearth.engine.compose import make_signin_link

    address = f"{base}/signin/link/{make_signin_link(home)}"
    typer.echo(f"\nSign-in link (one browser, once, within 10 minutes):\n{address}\n")
    for line in qr_lines(address):
        typer.echo(line)
    parts = urlsplit(base)
    if _is_loopback(parts.hostname or ""):
        example = f"{parts.scheme}://192.168.1.20" + (f":{parts.port}" if parts.port else "")
        typer.echo("\n" + textwrap.fill(
            f"{parts.hostname} is this machine's own address: a phone cannot open it. Give "
            "the address your phone reaches this machine at, as in `hearth token --link --url "
            f"{example}` (the gateway listens there with host = \"0.0.0.0\" under [gateway], "
            "or HEARTH_HOST=0.0.0.0).", width=88))


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False



@db_app.command("upgrade", cls=HearthCommand)
def db_upgrade() -> None:
    """Apply the database migrations (the gateway also does this at start)."""
    from hearth.engine.compose import upgrade_store

    home, config = _load()
    url = upgrade_store(home, config)
    typer.echo(f"Database is up to date: {url}")


@db_app.command("check", cls=HearthCommand)
def db_check() -> None:
    """Check the database: that it answers, where its schema stands, and the settings an
    acknowledged message's safety rests on. Changes nothing; exits 1 on a problem."""
    from hearth.engine.compose import check_store

    findings = check_store(Home.from_env())
    for found in findings:
        typer.echo(f"{'ok     ' if found.ok else 'PROBLEM'}  {found.name}: {found.sentence}")
    if not all(found.ok for found in findings):
        raise typer.Exit(1)


@db_app.command("copy", cls=HearthCommand)
def db_copy(
    to: Annotated[str, typer.Option("--to", metavar="URL",
                                    help="The empty database to copy into")],
) -> None:
    """Copy the database into another, empty one (to move from SQLite to PostgreSQL), with a
    progress bar, then count each table on both sides. Incognito and Temporary chats are not
    copied. Stop the gateway first."""
    from rich.progress import Progress as Bar

    from hearth.engine.compose import CopyRefused, copy_store

    with Bar(transient=True) as bar:
        tasks: dict[str, Any] = {}

        def shown(table: str, done: int, total: int) -> None:
            if table not in tasks:
                tasks[table] = bar.add_task(table, total=max(total, 1))
            bar.update(tasks[table], completed=done if total else 1)

        try:
            counted = copy_store(Home.from_env(), to, shown)
        except CopyRefused as refused:
            typer.echo(f"Nothing was copied: {refused}", err=True)
            raise typer.Exit(2) from None
    for each in counted:
        if each.source or each.target:
            typer.echo(f"{'ok     ' if each.ok else 'DIFFERS'}  {each.table}: {each.source} "
                       f"copied, {each.target} there")
    if not all(each.ok for each in counted):
        raise typer.Exit(1)
    typer.echo(f"Copied and verified: {sum(each.source for each in counted)} rows.")


@app.command("backup", cls=HearthCommand)
def backup(
    to: Annotated[Path | None, typer.Option(
        "--to", metavar="DIR", help="Where to write the archive (default: [backup] to in "
        "config.toml, else $HEARTH_HOME/backups)")] = None,
    verify: Annotated[Path | None, typer.Option(
        "--verify", metavar="FILE", help="Check an archive instead: its signature, manifest, "
        "every checksum and its database's schema")] = None,
    key: Annotated[Path | None, typer.Option(
        "--key", metavar="FILE", help="With --verify: the backup key of the home that made "
        "the archive (default: $HEARTH_HOME/backup.key)")] = None,
) -> None:
    """Back up the home into one archive while the gateway serves: the database (no
    Incognito, Temporary or deleted chat), config, memory documents, agents' files, prompts
    and attachments, signed with the home's backup key (made by the first backup). Never the
    token nor the key. Exits 1 when nothing was made (or the archive is bad)."""
    from hearth.engine.compose import BackupRefused, back_up, verify_backup

    try:
        if verify is not None:
            checked = verify_backup(verify, key)
            typer.echo(f"{verify}: a whole backup. {_described(checked.manifest)} Its "
                       "signature is the backup key's, every checksum matches and the "
                       "database opens with this Hearth's schema.")
            return
        home, config = _load()
        made = back_up(home, config, to.absolute() if to is not None else None)
    except BackupRefused as refused:
        typer.echo(str(refused), err=True)
        raise typer.Exit(1) from None
    typer.echo(f"Backed up to {made.path} ({made.size / 1e6:.1f} MB, {made.seconds:.1f} s). "
               f"{_described(made.manifest)} Signed with backup key {made.key} "
               f"({home.root / 'backup.key'}): a restore on another machine needs that file.")


def _described(manifest: Any) -> str:
    left_out = (f"; {manifest.left_out} Incognito or Temporary chat(s) left out"
                if manifest.left_out else "")
    engine = "SQLite" if manifest.engine == "sqlite" else "PostgreSQL"
    return (f"Made {manifest.created_at} by Hearth {manifest.hearth}: {manifest.chats} "
            f"chat(s){left_out}, {engine} database at migration {manifest.revision}, "
            f"{len(manifest.files)} file(s).")


@app.command("restore", cls=HearthCommand)
def restore(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="An archive `hearth backup` made")],
    home: Annotated[Path, typer.Option(
        "--home", metavar="DIR", help="The new home to restore into (new or empty)")],
    key: Annotated[Path | None, typer.Option(
        "--key", metavar="FILE", help="The backup key of the home that made the archive "
        "(default: $HEARTH_HOME/backup.key)")] = None,
) -> None:
    """Restore a backup into a new home, all of it or nothing: the archive is checked whole
    first, its signature with the backup key. A PostgreSQL backup goes into the empty
    database HEARTH_DATABASE_URL names. The restored gateway makes a new token."""
    from hearth.engine.compose import BackupRefused, restore_backup

    try:
        restored = restore_backup(file, home, key)
    except BackupRefused as refused:
        typer.echo(str(refused), err=True)
        raise typer.Exit(1) from None
    typer.echo(f"Restored into {restored.home} (database: {restored.database}). "
               f"{_described(restored.manifest)}")
    typer.echo(f"Start it with HEARTH_HOME={restored.home} hearth gateway; `hearth token` "
               "prints its new token.")


_URL = typer.Option(metavar="URL", help="The gateway's address (default: host and port in "
                    "config.toml, or HEARTH_HOST and HEARTH_PORT)")


def _gateway(url: str | None) -> tuple[str, str]:
    """The address and token of the gateway a client command talks to: `--url`, else where
    the configuration says this machine's gateway listens."""
    home, config = _load()
    return url or _address(config.gateway.host, config.gateway.port), home.token() or ""


@app.command(cls=HearthCommand)
def chat(
    message: Annotated[str | None, typer.Option(
        "-m", "--message", metavar="TEXT", help="Send one message, print the answer, exit")] = None,
    session: Annotated[str | None, typer.Option(
        "--session", metavar="KEY", help="Continue this chat (its last messages first)")] = None,
    url: Annotated[str | None, _URL] = None,
) -> None:
    """Talk to the agent: a prompt that streams answers and asks approvals, or one message
    with -m. At the prompt /help lists the commands; Ctrl-C stops a turn, Ctrl-D leaves."""
    from hearth.client.chat import run

    raise typer.Exit(run(*_gateway(url), session, message))


@app.command("export", cls=HearthCommand)
def export_chats(
    key: Annotated[str | None, typer.Argument(
        metavar="KEY", help="The chat to export (or --all)")] = None,
    every: Annotated[bool, typer.Option(
        "--all", help="Export every kept chat (never an Incognito or Temporary one)")] = False,
    out: Annotated[str | None, typer.Option(
        "--out", metavar="FILE", help="Write here (- for standard output; default: a file "
        "named after the chat, or hearth-export-DATE.jsonl, in this folder)")] = None,
    url: Annotated[str | None, _URL] = None,
) -> None:
    """Export a chat, or every kept chat, as JSON Lines (each with its variants), to import
    with `hearth import`."""
    from hearth.client.transfer import run_export

    if (key is None) == (not every):
        typer.echo("Name one chat to export, or --all for every kept chat.", err=True)
        raise typer.Exit(2)
    raise typer.Exit(run_export(*_gateway(url), key, out))


@app.command("import", cls=HearthCommand)
def import_chats(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A file `hearth export` wrote")],
    url: Annotated[str | None, _URL] = None,
) -> None:
    """Import chats from a JSON Lines export, each as a new chat (a kept chat is never
    overwritten). A file with a line that cannot be imported is refused whole."""
    from hearth.client.transfer import run_import

    raise typer.Exit(run_import(*_gateway(url), file))


@tools_app.command("explain", cls=HearthCommand)
def tools_explain(
    agent: Annotated[str, typer.Option(help="The agent whose tools to explain")] = "default",
) -> None:
    """Print the tools an agent has, and why each is in or out (built-in and MCP)."""
    from hearth.engine.background.helper_agents import SpawnHelpers
    from hearth.engine.background.job_tool import JOB_TOOL_NAMES
    from hearth.engine.turn.attachment_tool import OpenAttachment
    from hearth.memory.tools import MEMORY_TOOL_NAMES
    from hearth.tools import policy
    from hearth.tools.registry import builtin_tools

    home, config = _load()
    config = settings.apply(config, home.root)  # agents saved on the dashboard's Settings page
    names = [*(t.name for t in builtin_tools()), *MEMORY_TOOL_NAMES, *JOB_TOOL_NAMES,
             SpawnHelpers.name, OpenAttachment.name]
    for verdict in policy.explain(names, config, agent):
        mark = "+" if verdict.allowed else "-"
        typer.echo(f"{mark} {verdict.tool:<16} {verdict.reason}")
    for server in config.mcp_servers:
        may, reason = policy.may_use_server(server.name, config, agent)
        mark = "+" if may else "-"
        typer.echo(f"{mark} {server.name + '__*':<14} {reason} (MCP server "
                   f"{server.name!r}; its tools are listed when it first starts)")
    from hearth.tools.sandbox import placement

    where = placement(config.tools.sandbox, config.tools.network, config.tools.elevated)
    typer.echo(f"shell placement: {where.mode}: {where.describe()}"
               + (", elevated runs allowed" if where.elevated else ""))


@app.command(cls=HearthCommand)
def mcp(
    session: Annotated[str, typer.Option(
        "--session", metavar="KEY", help="The chat whose tools to serve")],
    url: Annotated[str | None, _URL] = None,
) -> None:
    """Serve Hearth's tools over MCP stdio to an agent CLI, each call run as the chat."""
    from hearth.client.mcp import run

    raise typer.Exit(run(*_gateway(url), session))


_JOB = typer.Argument(metavar="ID", help="The job's number (see `hearth jobs list`)")


@app.command("status", cls=HearthCommand)
def status(url: Annotated[str | None, _URL] = None) -> None:
    """The running gateway at a glance: turns, models, breakers, deliveries, owed chores."""
    from hearth.client.status import run_status

    raise typer.Exit(run_status(*_gateway(url)))


@jobs_app.command("list", cls=HearthCommand)
def jobs_list(url: Annotated[str | None, _URL] = None) -> None:
    """List the scheduled jobs with their schedule and next fire time."""
    from hearth.client.jobs import run_list

    raise typer.Exit(run_list(*_gateway(url)))


@jobs_app.command("add", cls=HearthCommand)
def jobs_add(
    prompt: Annotated[str, typer.Argument(metavar="PROMPT", help="What the job asks")],
    every: Annotated[int | None, typer.Option(
        "--every", metavar="MINUTES", help="Repeat every this many minutes")] = None,
    within: Annotated[int | None, typer.Option(
        "--in", metavar="MINUTES", help="Run once, this many minutes from now")] = None,
    cron: Annotated[str | None, typer.Option(
        "--cron", metavar="EXPR", help="Repeat on a cron expression ('0 9 * * 1-5')")] = None,
    at: Annotated[str | None, typer.Option(
        "--at", metavar="WHEN", help="Run once at a time: ISO 8601 (2026-12-24T09:00) or "
        "'tomorrow 9:00', 'in 20 minutes'")] = None,
    tz: Annotated[str | None, typer.Option(
        "--tz", metavar="ZONE", help="IANA time zone for --cron or --at (default: the "
        "gateway's)")] = None,
    missed: Annotated[str | None, typer.Option(
        "--missed", metavar="once|skip", help="Fires missed while the gateway was down: one "
        "catch-up run (once, the default) or none (skip)")] = None,
    url: Annotated[str | None, _URL] = None,
) -> None:
    """Schedule a prompt: give one of --every, --in, --cron or --at."""
    from hearth.client.jobs import run_add

    body = {"prompt": prompt, "every_minutes": every, "in_minutes": within, "cron": cron,
            "at": at, "timezone": tz, "missed": missed}
    raise typer.Exit(run_add(*_gateway(url), body))


def _job_action(action: str, job_id: int, url: str | None) -> None:
    from hearth.client.jobs import run_action

    raise typer.Exit(run_action(*_gateway(url), action, job_id))


@jobs_app.command("run", cls=HearthCommand)
def jobs_run(job_id: Annotated[int, _JOB], url: Annotated[str | None, _URL] = None) -> None:
    """Run a job now, as a run of its own chat (its schedule stays)."""
    _job_action("run", job_id, url)


@jobs_app.command("pause", cls=HearthCommand)
def jobs_pause(job_id: Annotated[int, _JOB], url: Annotated[str | None, _URL] = None) -> None:
    """Pause a job: it does not fire until resumed."""
    _job_action("pause", job_id, url)


@jobs_app.command("resume", cls=HearthCommand)
def jobs_resume(job_id: Annotated[int, _JOB], url: Annotated[str | None, _URL] = None) -> None:
    """Resume a paused job (from its next future time)."""
    _job_action("resume", job_id, url)


@jobs_app.command("delete", cls=HearthCommand)
def jobs_delete(job_id: Annotated[int, _JOB], url: Annotated[str | None, _URL] = None) -> None:
    """Delete a job (its chat stays)."""
    _job_action("delete", job_id, url)


_APP = typer.Argument(metavar="NAME", help="The app's name (letters, digits, '.', '_', '-')")


@apps_app.command("add", cls=HearthCommand)
def apps_add(
    name: Annotated[str, _APP],
    allow: Annotated[list[str], typer.Option(
        "--allow", metavar="PERMISSION", help="A permission to give it (again for more): "
        "read_chats, send_messages, manage_memory, run_jobs, choose_folders, admin")],
    limit: Annotated[list[str] | None, typer.Option(
        "--limit", metavar="USD/PERIOD", help="What its model calls may cost: 0.50/day, "
        "10/month (again for both); kept as [limits.apps.NAME]")] = None,
    url: Annotated[str | None, _URL] = None,
) -> None:
    """Make an app's token with the permissions given; the token is printed only now."""
    from hearth.client.apps import BadLimit, limits_of, run_add

    try:
        limits = limits_of(limit or [])
    except BadLimit as bad:
        raise typer.BadParameter(str(bad), param_hint="--limit") from bad
    raise typer.Exit(run_add(*_gateway(url), name, allow, limits))


@apps_app.command("list", cls=HearthCommand)
def apps_list(url: Annotated[str | None, _URL] = None) -> None:
    """List the apps: permissions, when made, last used, revoked."""
    from hearth.client.apps import run_list

    raise typer.Exit(run_list(*_gateway(url)))


@apps_app.command("revoke", cls=HearthCommand)
def apps_revoke(name: Annotated[str, _APP], url: Annotated[str | None, _URL] = None) -> None:
    """Revoke an app's token: refused from its next request on."""
    from hearth.client.apps import run_revoke

    raise typer.Exit(run_revoke(*_gateway(url), name))


def main() -> None:
    """The `hearth` command; an integration set up without its extra is said in one sentence
    naming what to install (`hearth.extras`), never shown as a traceback."""
    try:
        app()
    except MissingExtra as missing:
        _cannot_start(missing)
    except ModuleNotFoundError as error:
        found = missing_in(error)
        if found is None:
            raise
        _cannot_start(found)


def _cannot_start(missing: MissingExtra) -> NoReturn:
    typer.echo(f"Hearth cannot start: {missing}", err=True)
    raise SystemExit(2)


