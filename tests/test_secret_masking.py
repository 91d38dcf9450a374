"""API keys never leave the gateway through a provider's error: the one masker
(`hearth.masking`) at every boundary where text leaves the process or is kept.

The hole (security review): a provider's error that repeats the API key it was sent put the
key, unmasked, into the run's sentence, the chat's notice, the `done` frame, `/api/runs` and
the database; only the Settings page's Test masked it. The end-to-end tests drive a real
gateway whose models answer 401 and 500 with a body that echoes the key (`Reply.echo_key` on
the scripted provider) and look for the key everywhere: the API, the live frames, and the raw
bytes of every file under HEARTH_HOME (database, WAL, log). The unit tests hold the masker's
parts: each key shape, keys told to it by the registry and settings.json, the token, the log
records, the stores and the error envelope.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hearth import masking, settings
from hearth.config import Config, ModelConfig
from hearth.home import Home
from hearth.masking import REDACTED, mask
from hearth.models.openai_compat import OpenAICompatProvider
from hearth.models.registry import ModelRegistry
from hearth.models.types import Message, ModelRequest, ProviderUnavailable
from hearth.store import (
    audit as audit_store,
    runs as run_store,
    sessions as session_store,
    transcript,
)
from hearth.store.db import Database
from hearth.store.schema import audit
from hearth.web.app import create_app
from hearth.web.http.errors import envelope
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Api, Gateway, write_config
from tests.support.store import migrated

# Neither key has a shape the masker knows on sight: only being told them masks them.
OPENAI_KEY = "prov-" + secrets.token_urlsafe(24)
ANTHROPIC_KEY = "acct." + secrets.token_hex(16)
KEYS = {"leaky-openai": OPENAI_KEY, "leaky-anthropic": ANTHROPIC_KEY}


def leaks(root: Path, secret: str) -> list[str]:
    """Every file under `root` whose raw bytes hold `secret` (database, WAL, logs, …)."""
    needle = secret.encode()
    return sorted(str(path.relative_to(root)) for path in root.rglob("*")
                  if path.is_file() and needle in path.read_bytes())


# ---------------------------------------------------------------- a real gateway, leaky models

@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as model_server:
        yield model_server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory,
            server: ScriptedModelServer) -> Iterator[Gateway]:
    home = tmp_path_factory.mktemp("secret-masking") / "home"
    write_config(home, None, (
        '[[models]]\nid = "leaky-openai"\nprovider = "openai"\n'
        f'base_url = "{server.openai_base_url}"\napi_key_env = "LEAKY_OPENAI_KEY"\n'
        'model = "fake-model"\n\n'
        '[[models]]\nid = "leaky-anthropic"\nprovider = "anthropic"\n'
        f'base_url = "{server.anthropic_base_url}"\napi_key_env = "LEAKY_ANTHROPIC_KEY"\n'
        'model = "fake-claude"\n'))
    started = Gateway(home, {"LEAKY_OPENAI_KEY": OPENAI_KEY,
                             "LEAKY_ANTHROPIC_KEY": ANTHROPIC_KEY}).start()
    yield started
    started.kill()


@pytest.fixture(scope="module")
def api(gateway: Gateway) -> Iterator[Api]:
    client = gateway.client()
    yield client
    client.http.close()


def _turn_with_live_frames(api: Api, server: ScriptedModelServer, model: str,
                           status: int) -> tuple[str, str, list[dict[str, Any]]]:
    """A turn on `model` whose provider answers `status` echoing its key; the frames are read
    live (the provider is held until the stream is open), so `done` comes off the bus. The chat
    is Incognito: it never moves to the other model (invariant 8), so this one provider's
    error is the turn's ending; its sentence, notice and frames take the same paths."""
    key = api.new_chat(model=model, memory_mode="incognito")
    release = threading.Event()
    server.push(Reply(status=status, echo_key=True, hold=release))
    run_id = api.send(key, "hello")["run_id"]
    frames: list[dict[str, Any]] = []
    with api.http.stream("GET", f"/api/sessions/{key}/events", params={"after": 0},
                         timeout=30) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            frames.append(json.loads(line[6:]))
            release.set()  # the stream is open: now let the provider answer
            if frames[-1]["type"] == "done":
                break
    return key, run_id, frames


@pytest.mark.parametrize("status", [401, 500])
@pytest.mark.parametrize("model", ["leaky-openai", "leaky-anthropic"])
def test_a_provider_error_that_echoes_the_key_shows_it_nowhere(
        api: Api, server: ScriptedModelServer, model: str, status: int) -> None:
    """Before: the run's sentence read "The model call failed: leaky-openai answered HTTP
    401: Error code: 401 - Incorrect API key provided: prov-8y7zZyWEEoIf…" (Anthropic's:
    "… 'message': 'Incorrect API key provided: acct.4c8a…'}}"), the whole key, and so did the
    chat's notice, the live `done` frame and /api/runs/{id}; the same for a 500."""
    chat, run_id, frames = _turn_with_live_frames(api, server, model, status)
    secret = KEYS[model]
    said = f"Incorrect API key provided: {REDACTED}"  # the provider did say it: masked

    [done] = [f for f in frames if f["type"] == "done"]
    assert done["ending"] == "model_error" and f"HTTP {status}" in done["sentence"]
    assert said in done["sentence"] and secret not in json.dumps(frames)

    run = api.http.get(f"/api/runs/{run_id}").json()
    assert run["sentence"] == done["sentence"] and secret not in json.dumps(run)

    notices = [m for m in api.messages(chat) if m["kind"] == "notice"]
    assert notices and said in notices[-1]["text"]
    assert secret not in api.http.get(f"/api/sessions/{chat}").text
    assert secret not in api.http.get("/api/approvals").text
    assert secret not in api.http.get(f"/api/runs/{run_id}/wait", params={"timeout": 1}).text


def test_no_file_under_the_home_holds_a_key(api: Api, gateway: Gateway,
                                            server: ScriptedModelServer) -> None:
    """Before: the scan found the key in hearth.db-wal (the run's sentence, the notice).
    After the turns above, the raw bytes of every file under HEARTH_HOME — the database, its
    WAL, the gateway's log — hold neither key, nor the gateway's token; and still none once
    the gateway has stopped and SQLite has folded the WAL into the database."""
    _turn_with_live_frames(api, server, "leaky-openai", 401)  # this test may run alone
    for secret in (*KEYS.values(), api.http.headers["authorization"].split()[1]):
        assert leaks(gateway.home, secret) == []
    assert OPENAI_KEY not in gateway.output()
    gateway.stop()
    for secret in KEYS.values():
        assert leaks(gateway.home, secret) == []


def test_positive_control_the_byte_scan_finds_a_planted_write(tmp_path: Path) -> None:
    """The scan above can fail: a key written to an audit row past the masker (straight into
    the table) is found in the database's bytes."""
    home = Home(tmp_path / "planted")
    home.ensure()
    db = Database(home.database_url())
    db.upgrade()
    planted = "planted-" + secrets.token_hex(12)
    with db.write() as conn:
        conn.execute(audit.insert().values(at=time.time(), action="planted", actor="test",
                                           detail={"said": planted}))
    assert leaks(home.root, planted)
    db.close()
    assert leaks(home.root, planted)


# ---------------------------------------------------------------- the masker's shapes

SHAPES = [
    "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6",
    "sk-proj-" + "Q8xkzA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6_dF9g",
    "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8-AbCdEf",
    "sk-abc1" + "*" * 30 + "wxyz",  # a provider's starred echo of a key
    "xoxb-" + "123456789012-abcdefghijkl",
    "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "AIza" + "SyA-1234567890abcdefghijklmnopqrstu",
    "AKIA" + "IOSFODNN7EXAMPLE",
    "123456789:" + "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",  # a Telegram bot token
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
]


@pytest.mark.parametrize("secret", SHAPES)
def test_each_key_shape_is_masked_and_the_words_around_it_kept(secret: str) -> None:
    """Before: outside chat search nothing knew a key by its shape; a provider's error naming
    any of these was kept and shown as it came."""
    masked = mask(f"The provider said: {secret} (status 401)")
    assert secret not in masked and REDACTED in masked
    assert masked.startswith("The provider said: ") and masked.endswith(" (status 401)")


@pytest.mark.parametrize("line,kept,gone", [
    ("Authorization: Bearer abc.def-ghi_jkl", "Bearer [redacted]", "abc.def"),
    ("https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe",
     "/bot[redacted]/getMe", "AAHdq"),
    ("http://me:hunter2secret@proxy.local:8080/v1", "http://me:[redacted]@proxy.local",
     "hunter2"),
    ('{"api_key": "zzz-top-secret"}', '"api_key": "[redacted]"', "zzz-top"),
    ("x-api-key: abcdefgh12345678", "x-api-key: [redacted]", "abcdefgh"),
    ('"GET /signin/link/R6S22j2Pu75LSI4CtjaO6Q HTTP/1.1" 303', "/signin/link/[redacted] HTTP",
     "R6S22j2"),  # a one-time sign-in link's code, as uvicorn's access log shows its request
])
def test_a_labelled_secret_keeps_its_label(line: str, kept: str, gone: str) -> None:
    """Before: kept whole. The value goes, the label that says what it was stays."""
    masked = mask(line)
    assert kept in masked and gone not in masked


@pytest.mark.parametrize("line", [
    "The model call failed: local answered HTTP 500: Internal Server Error",
    "sk-learn is a library; risk-free-investments-for-everyone",
    "The turn ran 3 steps at 12:30; max_tokens=8192, tokens: 12345",
    "run_0123456789abcdef0123456789abcdef and chat-12-1764450000",
    "See https://example.com/docs/getting-started/install for details.",
    "The token is not this gateway's token.",
])
def test_ordinary_text_is_left_alone(line: str) -> None:
    assert mask(line) == line


def test_masking_is_idempotent() -> None:
    once = mask(f"Bearer abcdefghijk and {SHAPES[1]} and api_key={SHAPES[0]}")
    assert mask(once) == once


@pytest.mark.parametrize("text", [
    "a" * 1_000_000, "1" * 1_000_000, "Bearer " * 150_000, "sk-" * 300_000,
    "bot" + "1" * 1_000_000, "x://" + "a" * 500_000 + ":" + "b" * 500_000,
    "-----BEGIN RSA PRIVATE KEY-----" * 30_000, "api_key=" + "a" * 1_000_000,
])
def test_no_text_makes_masking_slow(text: str) -> None:
    """The shapes run on RE2, which cannot backtrack: a megabyte of near misses (runs
    with no end, headers with no key, labels with nothing after them) is masked in well
    under a second."""
    began = time.monotonic()
    mask(text)
    assert time.monotonic() - began < 1.0


# ---------------------------------------------------------------- what the masker is told

def test_a_key_kept_in_settings_json_is_masked_once_the_file_is_read(tmp_path: Path) -> None:
    """Before: only the Settings page's Test masked a key, and only the tested model's own; a
    key of another shape, kept in settings.json, was shown wherever an error repeated it."""
    key = "zebra-" + secrets.token_hex(16)
    assert key in mask(f"echoed {key}")  # nobody has told the masker yet
    path = settings.path_in(tmp_path)
    settings.save(path, settings.Settings(models=[ModelConfig(
        id="kept", base_url="http://127.0.0.1:9/v1", api_key=key, model="m")]))
    settings.load(path)
    assert mask(f"echoed {key}") == f"echoed {REDACTED}"


def test_a_model_added_in_settings_has_its_key_masked_at_once() -> None:
    """The registry tells the masker each model's key as it becomes known: at start (a key
    from the environment too) and when the Settings page adds one (`adopt`). Before: the
    registry told nobody; only the Test's own masker knew the one model it tested."""
    at_start, env_key, added = ("first-" + secrets.token_hex(12), "env-" + secrets.token_hex(12),
                                "added-" + secrets.token_hex(12))
    registry = ModelRegistry(Config(models=[
        ModelConfig(id="a", api_key=at_start, model="m"),
        ModelConfig(id="b", api_key_env="SOME_KEY", model="m")]), {"SOME_KEY": env_key})
    assert added in mask(added)
    with_c = Config.model_validate({"models": [
        {"id": "a", "api_key": at_start, "model": "m"},
        {"id": "b", "api_key_env": "SOME_KEY", "model": "m"},
        {"id": "c", "api_key": added, "model": "m"}]})
    registry = registry.adopt(with_c)
    registry.adopt(Config())  # removed: still masked, a turn begun on it may still fail with it
    for key in (at_start, env_key, added):
        assert mask(f"x {key} y") == f"x {REDACTED} y"
        assert key[:12] not in mask(f"shortened: {key[:14]}…")  # a provider's shortening


def test_the_gateway_token_and_mcp_secrets_are_masked(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: neither the gateway token (HEARTH_TOKEN) nor an MCP server's GITHUB_TOKEN was
    known to anything that masks; a value of a variable not named as a secret stays as is."""
    token, github = "tok-" + secrets.token_urlsafe(20), "ghtok" + secrets.token_hex(10)
    monkeypatch.setenv("HEARTH_TOKEN", token)
    config = Config.model_validate({"mcp_servers": [{
        "name": "gh", "command": "true", "env": {"GITHUB_TOKEN": github, "LANG": "C.UTF-8x"}}]})
    app = create_app(Home(tmp_path / "home"), config)
    app.state.engine.db.close()
    assert mask(f"{token} {github} C.UTF-8x") == f"{REDACTED} {REDACTED} C.UTF-8x"


# ---------------------------------------------------------------- the boundaries

def test_the_stores_keep_a_notice_an_ending_and_an_audit_row_masked(tmp_path: Path) -> None:
    """Before: store.runs.finish, a notice appended to the transcript and store.audit.write
    kept whatever they were given, a key included. What the user wrote is theirs: kept."""
    db = migrated(tmp_path, "h.db")
    leaked = f"Error code: 401 - Incorrect API key provided: {SHAPES[1]}"
    with db.write() as conn:
        session_store.insert(conn, key="chat-1", tab_id="t", memory_mode="persistent",
                             chat_number=None)
        run_store.insert(conn, run_id="run_1", session_key="chat-1", tab_id="t", generation=0,
                         principal="owner")
        user = transcript.append(conn, "chat-1", "user", {"text": f"my key is {SHAPES[1]}"})
        notice = transcript.append(conn, "chat-1", "notice", {"text": leaked})
        run_store.finish(conn, "run_1", status="error", ending="model_error", sentence=leaked)
        audit_store.write(conn, "x", actor="test", detail={"why": [leaked]})
    with db.read() as conn:
        run = run_store.get(conn, "run_1")
        row = conn.execute(audit.select()).one()
    assert SHAPES[1] in user.content["text"]
    for kept in (notice.content["text"], run.sentence if run else "", row.detail["why"][0]):
        assert SHAPES[1] not in kept and kept.endswith(f"provided: {REDACTED}")
    db.close()


def test_an_error_envelope_never_carries_a_key() -> None:
    """Before: `envelope` answered the message and details as given."""
    answer = envelope(502, "bad_gateway", f"upstream said Bearer {SHAPES[0]}",
                      details={"hint": [SHAPES[2]]})
    body = bytes(answer.body).decode()
    assert SHAPES[0] not in body and SHAPES[2] not in body and "Bearer [redacted]" in body


def test_a_logged_provider_error_is_masked_traceback_and_all(
        tmp_path: Path, server: ScriptedModelServer, caplog: pytest.LogCaptureFixture) -> None:
    """A real SDK error (the key in its message) logged with its traceback, as the turn logs
    an unexpected failure. Before: nothing masked a log record; the traceback's "direct cause"
    (the SDK's AuthenticationError) showed the key. Masking is installed at gateway start and
    masks records as they are made, so a capture added afterwards (caplog) sees it masked."""
    create_app(Home(tmp_path / "home"), Config()).state.engine.db.close()  # a gateway start
    key = "logged-" + secrets.token_hex(12)
    masking.know(key)
    provider = OpenAICompatProvider(model_id="m", model_name="fake-model",
                                    base_url=server.openai_base_url, api_key=key)
    server.push(Reply(status=401, echo_key=True))
    caplog.set_level(logging.INFO)

    async def call() -> None:
        async for _ in provider.stream(ModelRequest([Message("user", "hi")], [])):
            pass

    with pytest.raises(ProviderUnavailable) as failed:
        asyncio.run(call())
    assert key in str(failed.value.__cause__)  # the SDK's own error still holds it
    try:
        raise RuntimeError("the turn failed") from failed.value
    except RuntimeError:
        logging.getLogger("hearth.engine.turn.runner").exception("turn %s failed: %s", "run_x",
                                                          failed.value.__cause__)
    assert "Incorrect API key provided" in caplog.text and "AuthenticationError" in caplog.text
    assert key not in caplog.text



def test_a_log_record_is_masked_and_keeps_its_shape() -> None:
    """A record with nothing secret is left as made; one with a key in an argument keeps its
    format and argument tuple (uvicorn's access log unpacks `args`), the key masked.
    Before: records were never masked."""
    masking.mask_logs()
    make = logging.getLogRecordFactory()
    plain = make("hearth.x", logging.INFO, __file__, 1, "ran %s in %d ms", ("run_1", 12), None)
    assert (plain.msg, plain.args) == ("ran %s in %d ms", ("run_1", 12))
    access = make("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s"',
                  ("127.0.0.1", "GET", f"/x?api_key={SHAPES[0]}"), None)
    assert access.msg == '%s - "%s %s"' and len(access.args) == 3
    assert SHAPES[0] not in access.getMessage() and "api_key=[redacted]" in access.getMessage()
