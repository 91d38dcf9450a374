"""The `hearth` command: gateway, chat, token, db."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from hearth import settings
from hearth.config import Config, ConfigError, load_config
from hearth.home import Home, private_umask

app = typer.Typer(help="Hearth: a local-first personal AI agent gateway.", no_args_is_help=True)
db_app = typer.Typer(help="The database.", no_args_is_help=True)
app.add_typer(db_app, name="db")
tools_app = typer.Typer(help="The agent's tools.", no_args_is_help=True)
app.add_typer(tools_app, name="tools")


@app.callback()
def _private_files() -> None:
    # before any command: whatever it writes into the home is the owner's alone (0600/0700)
    private_umask()


def _load() -> tuple[Home, Config]:
    home = Home.from_env()
    try:
        return home, load_config(home.config_file)
    except ConfigError as error:
        typer.echo(f"Hearth cannot start: {error}", err=True)
        raise typer.Exit(2) from error


@app.command()
def gateway(
    host: Annotated[str | None, typer.Option(help="Address to listen on")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on")] = None,
) -> None:
    """Run the gateway (HTTP API, turns, live events) in the foreground."""
    from hearth.web.app import create_app
    from hearth.web.server import serve

    home, config = _load()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    bind_host = host or config.gateway.host
    bind_port = port or config.gateway.port
    application = create_app(home, config)
    typer.echo(f"Hearth gateway on http://{bind_host}:{bind_port} (home {home.root})", err=True)
    typer.echo(f"Shell: {application.state.engine.placement.describe()}", err=True)
    serve(application, host=bind_host, port=bind_port)


@app.command()
def token() -> None:
    """Print the gateway's bearer token (made on first use)."""
    typer.echo(Home.from_env().token())


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply the database migrations (the gateway also does this at start)."""
    from hearth.engine.compose import upgrade_store

    home, config = _load()
    url = upgrade_store(home, config)
    typer.echo(f"Database is up to date: {url}")


@app.command()
def chat(
    message: Annotated[str | None, typer.Option("-m", "--message", help="Send one message")] = None,
    session: Annotated[str | None, typer.Option("--session", help="Continue this chat")] = None,
    url: Annotated[str | None, typer.Option(help="Gateway URL")] = None,
) -> None:
    """Talk to the agent: a REPL that streams answers, or one message with -m."""
    from hearth.client.chat import ChatClient, GatewayUnavailable

    home, config = _load()
    base = url or f"http://{config.gateway.host}:{config.gateway.port}"
    client = ChatClient(base, home.token() or "")
    try:
        key = client.open(session)
        if message is not None:
            ok = client.say(key, message, out=sys.stdout)
            raise typer.Exit(0 if ok else 1)
        typer.echo(f"Chat {key} — type a message, /exit to leave.", err=True)
        while True:
            try:
                line = input("you> ")
            except (EOFError, KeyboardInterrupt):
                typer.echo("", err=True)
                break
            if line.strip() in ("/exit", "/quit"):
                break
            if line.strip():
                client.say(key, line, out=sys.stdout)
    except GatewayUnavailable as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(3) from error
    finally:
        client.close()


@tools_app.command("explain")
def tools_explain(
    agent: Annotated[str, typer.Option(help="The agent whose tools to explain")] = "default",
) -> None:
    """Print the tools an agent has, and why each is in or out (built-in and MCP)."""
    from hearth.engine.job_tool import JOB_TOOL_NAMES
    from hearth.memory.tools import MEMORY_TOOL_NAMES
    from hearth.tools import policy
    from hearth.tools.registry import builtin_tools

    home, config = _load()
    config = settings.apply(config, home.root)  # agents saved on the dashboard's Settings page
    names = [*(t.name for t in builtin_tools()), *MEMORY_TOOL_NAMES, *JOB_TOOL_NAMES]
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


@app.command()
def mcp(
    session: Annotated[str, typer.Option("--session", help="The chat whose tools to serve")],
    url: Annotated[str | None, typer.Option(help="Gateway URL")] = None,
) -> None:
    """Serve Hearth's tools over MCP stdio to an agent CLI, each call run as the chat."""
    from hearth.client.mcp import run

    home, config = _load()
    base = url or f"http://{config.gateway.host}:{config.gateway.port}"
    raise typer.Exit(run(base, home.token() or "", session))


def main() -> None:
    app()


