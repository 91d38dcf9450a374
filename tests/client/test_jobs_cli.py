"""`hearth jobs list|add|run|pause|resume|delete` as a user runs it: the command in a subprocess
against a real gateway."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Gateway
from tests.support.cli import hearth

PROMPT = "Check the mailbox\nand tell me what came"


def jobs(gateway: Gateway) -> list[tuple[Any, ...]]:
    with sqlite3.connect(gateway.home / "hearth.db", timeout=30) as conn:
        return conn.execute("SELECT id, cron, timezone, missed, enabled, every_seconds "
                            "FROM jobs ORDER BY id").fetchall()


def test_jobs_round_trip_through_the_cli(gateway: Gateway, home: Path,
                                         model_server: ScriptedModelServer) -> None:
    model_server.default = Reply(text="Two letters.")
    url = ("--url", gateway.url)
    added = hearth("jobs", "add", PROMPT, "--cron", "0 9 * * 1-5", "--tz", "Europe/Paris",
                   "--missed", "skip", *url, home=home)
    assert added.returncode == 0, added.stderr
    assert "Scheduled job #1: every weekday at 09:00 (Europe/Paris), next at" in added.stdout
    every = hearth("jobs", "add", "Stretch", "--every", "90", *url, home=home)
    assert every.returncode == 0 and "job #2: every 90 min" in every.stdout
    assert jobs(gateway) == [(1, "0 9 * * 1-5", "Europe/Paris", "skip", 1, None),
                             (2, None, None, "once", 1, 5400)]

    listed = hearth("jobs", "list", *url, home=home, extra_env={"COLUMNS": "200"})
    assert listed.returncode == 0, listed.stderr
    assert "Check the mailbox" in listed.stdout and "and tell me" not in listed.stdout
    assert "every weekday at 09:00 (Europe/Paris)" in listed.stdout
    assert "Stretch" in listed.stdout and "never" in listed.stdout

    paused = hearth("jobs", "pause", "2", *url, home=home)
    assert paused.returncode == 0 and "Paused job #2" in paused.stdout
    assert jobs(gateway)[1][4] == 0
    assert "paused" in hearth("jobs", "list", *url, home=home,
                              extra_env={"COLUMNS": "200"}).stdout
    resumed = hearth("jobs", "resume", "2", *url, home=home)
    assert resumed.returncode == 0 and jobs(gateway)[1][4] == 1

    ran = hearth("jobs", "run", "1", *url, home=home)
    assert ran.returncode == 0, ran.stderr
    assert "Job #1 is running now" in ran.stdout and "chat job-1" in ran.stdout
    run_id = ran.stdout.split("run ")[1].split(" ")[0]
    assert gateway.client().wait(run_id)["status"] == "complete"

    deleted = hearth("jobs", "delete", "2", *url, home=home)
    assert deleted.returncode == 0 and [j[0] for j in jobs(gateway)] == [1]


def test_the_cli_shows_the_gateways_sentence_and_exits_1(gateway: Gateway, home: Path) -> None:
    url = ("--url", gateway.url)
    bad = hearth("jobs", "add", "x", "--cron", "0 25 * * *", *url, home=home)
    assert bad.returncode == 1
    assert "hour field (2nd field, at character 3) '25' is out of range (0-23)" in bad.stderr
    missing = hearth("jobs", "pause", "42", *url, home=home)
    assert missing.returncode == 1 and "There is no job #42." in missing.stderr
    assert jobs(gateway) == []


def test_the_cli_without_a_gateway_exits_3(home: Path) -> None:
    done = hearth("jobs", "list", "--url", "http://127.0.0.1:9", home=home)
    assert done.returncode == 3 and "hearth gateway" in done.stderr
