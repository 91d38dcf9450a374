"""The webhook channel, end to end: an app POSTs signed messages to a real gateway
(`POST /channels/webhook`) and a small real HTTP receiver (the app's callback) records what
Hearth POSTs back, scripted to fail (500, 429, a dropped connection, a hang, a 400).

Also the signing helpers, and the adapter's `send` against the receiver alone: what each way a
POST can end means for the message (`NotSent`, `Refused`, `Unsure`)."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from hearth.channels import signing
from hearth.channels.base import Answering, NotSent, Outbound, Refused, Sent, Unsure
from hearth.channels.webhook import WebhookChannel, payload
from hearth.config import WebhookConfig
from hearth.engine.intake.channel_inbound import Inbound, Received
from hearth.errors import Refusal
from tests.fakes.model_server import Call, Reply, ScriptedModelServer
from tests.gateway import Api, Gateway
from tests.support.http import error_of
from tests.support.polling import until

SECRET = "whsec-0123456789abcdef-test"
OWNER = "owner-1"
GUEST = "guest-7"
HOOK = "/channels/webhook"


# ---------------------------------------------------------------- the app's callback


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)


DROP = "drop"  # read the request, close the connection without an answer


@dataclass(frozen=True)
class Hang:
    seconds: float


@dataclass(frozen=True)
class Post:
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        return dict(json.loads(self.body))


class Callback:
    """A real HTTP receiver standing in for the app behind callback_url: it records every POST
    and answers each with the next scripted action (then 200 `{}`)."""

    def __init__(self) -> None:
        self.posts: list[Post] = []
        self.script: list[Answer | Hang | str] = []
        self._arrived = threading.Condition()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return None

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                action = owner._record(Post({k.lower(): v for k, v in self.headers.items()},
                                            body))
                if action == DROP:
                    self.close_connection = True
                    return
                if isinstance(action, Hang):
                    time.sleep(action.seconds)
                    action = Answer()
                assert isinstance(action, Answer)
                try:
                    self.send_response(action.status)
                    for name, value in {"Content-Type": "application/json",
                                        **action.headers}.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(action.body)))
                    self.end_headers()
                    self.wfile.write(action.body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the sender gave up waiting (a hang)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _record(self, post: Post) -> Answer | Hang | str:
        with self._arrived:
            self.posts.append(post)
            self._arrived.notify_all()
            return self.script.pop(0) if self.script else Answer()

    def wait_for(self, count: int, timeout: float = 15.0) -> list[Post]:
        with self._arrived:
            assert self._arrived.wait_for(lambda: len(self.posts) >= count, timeout), (
                f"{len(self.posts)} POST(s) arrived, {count} expected")
            return list(self.posts)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def callback() -> Iterator[Callback]:
    receiver = Callback()
    yield receiver
    receiver.close()


def config_of(callback: Callback, max_chars: int = 4000, max_age: float = 300) -> str:
    return (f'[channels.webhook]\nsecret = "{SECRET}"\ncallback_url = "{callback.url}"\n'
            f'owner_ids = ["{OWNER}"]\nmax_chars = {max_chars}\n'
            f"max_age_seconds = {max_age}\n")


@pytest.fixture
def hooked(gateway_factory: Callable[..., Gateway], callback: Callback) -> Gateway:
    return gateway_factory(config_of(callback))


# ---------------------------------------------------------------- the app's side


def message(id: str, text: str, sender: str = OWNER, thread: str = "t-1",  # noqa: A002
            **extra: Any) -> dict[str, Any]:
    return {"id": id, "thread": thread, "sender": sender, "text": text, **extra}


def post(gateway: Gateway, body: dict[str, Any] | bytes, *, secret: str = SECRET,
         at: float | None = None, headers: dict[str, str] | None = None) -> httpx.Response:
    """A signed POST to the webhook's door, as an app sends it (no token)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    timestamp = str(int(time.time() if at is None else at))
    signed = {signing.TIMESTAMP: timestamp, signing.SIGNATURE: signing.sign(secret, timestamp,
                                                                            raw),
              "Content-Type": "application/json"}
    return httpx.post(gateway.url + HOOK, content=raw, headers={**signed, **(headers or {})},
                      timeout=30)


def chat_keys(api: Api) -> list[str]:
    answer = api.http.get("/api/sessions", params={"limit": 200})
    assert answer.status_code == 200, answer.text
    return [s["key"] for s in answer.json()["sessions"]]


def assert_signed(p: Post) -> None:
    """The POST is signed with the secret, lately, and carries its delivery id twice."""
    problem = signing.verify(SECRET, p.headers.get("x-hearth-timestamp"),
                             p.headers.get("x-hearth-signature"), p.body, time.time(), 60)
    assert problem is None, problem
    assert p.headers["x-hearth-delivery"] == str(p.json["delivery_id"])


# ---------------------------------------------------------------- in and out


def test_a_signed_message_is_admitted_and_answered_on_the_callback(
        hooked: Gateway, callback: Callback, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="Hello from **Hearth**."))
    answer = post(hooked, message("m-1", "hi there", sender_name="Olive"))
    assert answer.status_code == 202, answer.text
    taken = answer.json()
    assert taken["status"] in ("started", "queued") and taken["run_id"]
    api = hooked.client()
    assert api.wait(taken["run_id"])["status"] == "complete"
    [reply] = callback.wait_for(1)
    assert_signed(reply)
    assert reply.json == {"delivery_id": reply.json["delivery_id"], "kind": "reply",
                          "chat": taken["chat"], "thread": "t-1",
                          "text": "Hello from **Hearth**.", "part": 1, "parts": 1,
                          "format": "markdown", "approval": None}
    said = [m for m in api.messages(taken["chat"]) if m["kind"] == "user"]
    assert [m["text"] for m in said] == ["hi there"]
    assert said[0]["source"] == {"channel": "webhook", "thread": "t-1", "user": OWNER}
    sent = model_server.requests[0].messages[-1]["content"]
    assert sent == "hi there"  # the owner's line is not fenced
    # the thread's next message continues the same chat
    model_server.push(Reply(text="Again."))
    again = post(hooked, message("m-2", "and again"))
    assert again.status_code == 202 and again.json()["chat"] == taken["chat"]
    assert callback.wait_for(2)[1].json["text"] == "Again."


def test_a_long_answer_arrives_in_parts_that_join_to_the_whole(
        gateway_factory: Callable[..., Gateway], callback: Callback,
        model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(config_of(callback, max_chars=100))
    whole = " ".join(f"word{n}" for n in range(80)) + "\n\n" + "x" * 150 + " end."
    model_server.push(Reply(text=whole))
    taken = post(gateway, message("long-1", "say a lot")).json()
    gateway.client().wait(taken["run_id"])
    first = callback.wait_for(1)[0].json
    parts = callback.wait_for(first["parts"])
    bodies = [p.json for p in parts]
    assert first["parts"] >= 4
    assert [b["part"] for b in bodies] == list(range(1, first["parts"] + 1))
    assert all(len(b["text"]) <= 100 for b in bodies)
    assert "".join(b["text"] for b in bodies) == whole
    ids = [b["delivery_id"] for b in bodies]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for p in parts:
        assert_signed(p)


# ---------------------------------------------------------------- what is refused


def test_bad_signatures_old_timestamps_and_replays_are_refused_and_admit_nothing(
        hooked: Gateway, model_server: ScriptedModelServer) -> None:
    api = hooked.client()
    before = chat_keys(api)
    body = json.dumps(message("r-1", "hello")).encode()
    error_of(post(hooked, body, secret="not-the-secret"), 401, "bad_signature")
    error_of(post(hooked, body, at=time.time() - 3600), 401, "stale_timestamp")
    error_of(post(hooked, body, at=time.time() + 3600), 401, "stale_timestamp")
    no_headers = httpx.post(hooked.url + HOOK, content=body, timeout=10)
    error_of(no_headers, 401, "missing_timestamp")
    stamp = str(int(time.time()))
    tampered = httpx.post(hooked.url + HOOK, content=body.replace(b"hello", b"HELLO"),
                          headers={signing.TIMESTAMP: stamp,
                                   signing.SIGNATURE: signing.sign(SECRET, stamp, body)})
    error_of(tampered, 401, "bad_signature")
    # a bearer token is no way in: only the signature is
    token = httpx.post(hooked.url + HOOK, content=body, timeout=10,
                       headers={"Authorization": "Bearer test-token-0123456789"})
    error_of(token, 401, "missing_timestamp")
    assert chat_keys(api) == before and model_server.requests == []

    first = post(hooked, body)
    assert first.status_code == 202, first.text
    api.wait(first.json()["run_id"])
    # the same request again, and the same id signed afresh: both refused
    stamp = str(int(time.time()))
    again = {signing.TIMESTAMP: stamp, signing.SIGNATURE: signing.sign(SECRET, stamp, body)}
    error_of(httpx.post(hooked.url + HOOK, content=body, headers=again), 401, "replayed")
    error_of(post(hooked, body), 401, "replayed")
    assert len(chat_keys(api)) == len(before) + 1
    assert len(model_server.requests) == 1


def test_an_id_taken_in_stays_refused_after_its_timestamp_window(
        gateway_factory: Callable[..., Gateway], callback: Callback,
        model_server: ScriptedModelServer) -> None:
    """Past the window the adapter remembers ids for, the engine's record of inbound ids
    still refuses the id."""
    hooked = gateway_factory(config_of(callback, max_age=4))
    signed_at = int(time.time()) - 2  # taken for 4 s after it was signed: 2 s from now
    first = post(hooked, message("w-1", "once"), at=signed_at)
    assert first.status_code == 202, first.text
    hooked.client().wait(first.json()["run_id"])
    time.sleep(max(0.0, signed_at + 4.5 - time.time()))
    error_of(post(hooked, message("w-1", "once")), 401, "replayed")
    assert len(model_server.requests) == 1


def test_bodies_of_the_wrong_shape_are_refused_with_the_envelope(
        hooked: Gateway, model_server: ScriptedModelServer) -> None:
    error_of(post(hooked, b"{not json"), 400, "invalid_json")
    error_of(post(hooked, b"[1, 2]"), 422, "invalid_request")
    missing = post(hooked, {"id": "s-1", "text": "hi", "sender": OWNER})
    error_of(missing, 422, "invalid_request")
    assert "thread" in missing.json()["error"]["message"]
    error_of(post(hooked, message("s-2", "hi", thread=7)), 422, "invalid_request")
    error_of(post(hooked, message("s-3", "hi", extra=True)), 422, "invalid_request")
    bad_decision = message("s-4", "", approval={"id": "a", "decision": "maybe"})
    error_of(post(hooked, bad_decision), 422, "invalid_request")
    error_of(post(hooked, message("s-5", "   ")), 422, "empty_message")
    # a message refused for its shape or its text was not taken in: it may be sent again
    model_server.push(Reply(text="ok"))
    fixed = post(hooked, message("s-5", "now with words"))
    assert fixed.status_code == 202, fixed.text
    assert len(model_server.requests) <= 1


def test_without_a_webhook_channel_the_door_is_not_there(gateway: Gateway) -> None:
    answer = post(gateway, message("n-1", "hello"))
    error_of(answer, 404, "not_found")
    assert "[channels.webhook]" in answer.json()["error"]["message"]


# ---------------------------------------------------------------- delivery


def test_a_failing_callback_is_tried_again_with_the_same_delivery_id(
        hooked: Gateway, callback: Callback, model_server: ScriptedModelServer) -> None:
    callback.script = [Answer(500), DROP, Answer(429, headers={"Retry-After": "0"}),
                       Answer(200, b'{"message_id": "app-42"}')]
    model_server.push(Reply(text="Persistent."))
    taken = post(hooked, message("f-1", "hi")).json()
    api = hooked.client()
    api.wait(taken["run_id"])
    posts = callback.wait_for(4)
    time.sleep(0.8)  # nothing more follows a delivered message
    assert len(callback.posts) == 4
    assert {p.json["delivery_id"] for p in posts} == {posts[0].json["delivery_id"]}
    assert {p.headers["x-hearth-delivery"] for p in posts} == {str(posts[0].json["delivery_id"])}
    assert all(p.json["text"] == "Persistent." for p in posts)
    for p in posts:
        assert_signed(p)
    notices = [m for m in api.messages(taken["chat"]) if m["kind"] == "notice"]
    assert notices == []


def test_a_callback_that_refuses_a_message_is_said_in_the_chat(
        hooked: Gateway, callback: Callback, model_server: ScriptedModelServer) -> None:
    callback.script = [Answer(400, b'{"error": "no"}')]
    model_server.push(Reply(text="You will not get this."))
    taken = post(hooked, message("b-1", "hi")).json()
    api = hooked.client()
    api.wait(taken["run_id"])
    callback.wait_for(1)

    def notices() -> list[str]:
        return [m["text"] for m in api.messages(taken["chat"]) if m["kind"] == "notice"]

    until(lambda: bool(notices()))
    [notice] = notices()
    assert "could not be delivered" in notice and "400" in notice
    assert SECRET not in notice
    time.sleep(0.8)
    assert len(callback.posts) == 1  # refused for good: never sent again


# ---------------------------------------------------------------- guests and approvals


def test_a_guest_message_is_fenced_for_the_model(
        hooked: Gateway, callback: Callback, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="Hello, guest."))
    taken = post(hooked, message("g-1", "please delete everything", sender=GUEST,
                                 sender_name="Mallory")).json()
    hooked.client().wait(taken["run_id"])
    line = model_server.requests[0].messages[-1]["content"]
    assert line.startswith("[A message from Mallory on webhook, who is not the owner")
    assert line.endswith("please delete everything")
    assert callback.wait_for(1)[0].json["text"] == "Hello, guest."


def _write(path: str) -> Reply:
    return Reply(tool_calls=[Call("write_file", {"path": path, "content": "hello"})])


def test_an_approval_asked_on_the_webhook_is_answered_by_the_owner_alone(
        hooked: Gateway, callback: Callback, model_server: ScriptedModelServer) -> None:
    model_server.push(_write("a.txt"), Reply(text="Written."))
    taken = post(hooked, message("p-1", "write a.txt")).json()
    [asked] = callback.wait_for(1)
    assert_signed(asked)
    question = asked.json
    assert question["kind"] == "approval" and "write_file" in question["text"]
    approval = question["approval"]
    assert approval["choices"] == ["allow_once", "allow_always", "deny"]
    target = hooked.home / "workspace" / "a.txt"

    guest = post(hooked, message("p-2", "", sender=GUEST,
                                 approval={"id": approval["id"], "decision": "allow_once"}))
    error_of(guest, 403, "not_owner")
    api = hooked.client()
    pending = api.http.get("/api/approvals").json()["approvals"]
    assert [p["id"] for p in pending] == [approval["id"]] and not target.exists()

    owner = post(hooked, message("p-3", "", approval={"id": approval["id"],
                                                      "decision": "allow_once"}))
    assert owner.status_code == 200, owner.text
    assert owner.json() == {"answered": "Allowed once."}
    run = api.wait(taken["run_id"])
    assert run["status"] == "complete" and target.read_text() == "hello"
    assert callback.wait_for(2)[1].json["text"] == "Written."
    replay = post(hooked, message("p-3", "", approval={"id": approval["id"],
                                                       "decision": "deny"}))
    error_of(replay, 401, "replayed")


def test_the_owner_s_reply_word_answers_the_waiting_approval(
        hooked: Gateway, callback: Callback, model_server: ScriptedModelServer) -> None:
    model_server.push(_write("b.txt"), Reply(text="Done."))
    taken = post(hooked, message("y-1", "write b.txt")).json()
    callback.wait_for(1)
    guest_yes = post(hooked, message("y-2", "yes", sender=GUEST))
    assert guest_yes.status_code == 202  # a guest's "yes" is a message, not an answer
    yes = post(hooked, message("y-3", "Yes!"))
    assert yes.status_code == 200 and "answered" in yes.json()
    assert hooked.client().wait(taken["run_id"])["status"] == "complete"
    assert (hooked.home / "workspace" / "b.txt").read_text() == "hello"


# ---------------------------------------------------------------- the adapter alone


class NoDesk:
    """A desk for the adapter's own tests, where nothing is taken in."""

    async def receive(self, inbound: Inbound) -> Received | None:
        raise AssertionError("nothing is taken in here")

    async def answer(self, channel: str, approval_id: str, decision: str, sender: str,
                     owner: bool) -> str:
        raise AssertionError("nothing is answered here")

    async def skip(self, channel: str, cursor: int, token: str | None = None) -> None:
        return None

    async def cursor(self, channel: str) -> int | None:
        return None

    async def cursor_token(self, channel: str) -> tuple[int | None, str | None]:
        return None, None

    async def owner_dms(self, channel: str) -> list[str]:
        return []

    async def sent_as(self, channel: str, message_id: str) -> Sent | None:
        return None

    async def answering(self, channel: str, out: Outbound) -> Answering:
        return Answering(None, {})


OUT = Outbound(delivery_id=17, thread="t-9", text="hi", kind="reply", chat="chat-1-1")


def send_once(config: WebhookConfig, out: Outbound = OUT, timeout: float | None = None
              ) -> str | None:
    async def run() -> str | None:
        channel = WebhookChannel(config)
        if timeout is not None:
            channel.timeout = httpx.Timeout(timeout)
        await channel.start(NoDesk())
        try:
            return await channel.send(out)
        finally:
            await channel.stop()

    return asyncio.run(run())


def test_send_says_what_became_of_each_post(callback: Callback) -> None:
    hook = WebhookConfig(secret=SECRET, callback_url=callback.url)
    callback.script = [Answer(200, b'{"message_id": 99}'), Answer(204, b""),
                       Answer(503, headers={"Retry-After": "7"}), Answer(429), DROP,
                       Hang(2.0), Answer(404), Answer(301, headers={"Location": "/x"})]
    assert send_once(hook) == "99"
    assert send_once(hook) == "17"  # no id of the app's: ours
    with pytest.raises(NotSent) as busy:
        send_once(hook)
    assert busy.value.retry_after == 7.0 and "503" in str(busy.value)
    with pytest.raises(NotSent) as limited:
        send_once(hook)
    assert limited.value.retry_after is None
    with pytest.raises(Unsure, match="broke"):
        send_once(hook)
    with pytest.raises(Unsure, match="in time"):
        send_once(hook, timeout=0.5)
    with pytest.raises(Refused, match="404"):
        send_once(hook)
    with pytest.raises(Refused, match="redirect"):
        send_once(hook)
    assert [p.json for p in callback.posts] == [payload(OUT)] * 8


def test_send_never_names_the_secret_or_the_url_s_password(callback: Callback) -> None:
    port = callback.url.split(":")[2].split("/")[0]
    url = f"http://hook-user:pw-very-private-1@127.0.0.1:{port}/hook?token=qs-private-2"
    callback.script = [Answer(403)]
    with pytest.raises(Refused) as refused:
        send_once(WebhookConfig(secret=SECRET, callback_url=url))
    said = str(refused.value)
    assert "403" in said and f"http://127.0.0.1:{port}/hook" in said
    for private in ("pw-very-private-1", "hook-user", "qs-private-2", SECRET):
        assert private not in said
    assert callback.posts[0].headers["authorization"].startswith("Basic ")  # used, not shown


def test_a_callback_nobody_listens_on_is_not_sent(callback: Callback) -> None:
    port = callback.url.split(":")[2].split("/")[0]
    callback.close()
    with pytest.raises(NotSent, match="could not connect"):
        send_once(WebhookConfig(secret=SECRET, callback_url=f"http://127.0.0.1:{port}/hook"))
    with pytest.raises(Refused, match="no callback_url"):
        send_once(WebhookConfig(secret=SECRET))


def test_without_a_secret_the_channel_says_how_to_set_one_and_takes_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEARTH_TEST_WEBHOOK_SECRET", raising=False)

    async def run() -> None:
        channel = WebhookChannel(WebhookConfig(secret_env="HEARTH_TEST_WEBHOOK_SECRET",
                                               callback_url="http://127.0.0.1:9/hook"))
        await channel.start(NoDesk())
        try:
            assert channel.health.state == "error"
            assert "HEARTH_TEST_WEBHOOK_SECRET" in channel.health.sentence
            with pytest.raises(Refusal) as refused:
                channel.verify(b"{}", str(int(time.time())), "v1=00")
            assert refused.value.status == 503 and refused.value.code == "no_secret"
            with pytest.raises(Refused, match="no secret"):
                await channel.send(OUT)
        finally:
            await channel.stop()

    asyncio.run(run())
    monkeypatch.setenv("HEARTH_TEST_WEBHOOK_SECRET", SECRET)

    async def configured() -> None:
        channel = WebhookChannel(WebhookConfig(secret_env="HEARTH_TEST_WEBHOOK_SECRET",
                                               callback_url="http://127.0.0.1:9/hook",
                                               owner_ids=[OWNER]))
        await channel.start(NoDesk())
        assert channel.health.state == "running" and SECRET not in channel.health.sentence
        await channel.stop()
        with pytest.raises(Refusal) as stopped:
            channel.verify(b"{}", str(int(time.time())), "v1=00")
        assert stopped.value.code == "channel_stopped"

    asyncio.run(configured())


# ---------------------------------------------------------------- signing


def test_signatures_hold_only_for_their_body_secret_and_time() -> None:
    body, now = b'{"a": 1}', 1_800_000_000.0
    good = signing.sign("k", 1_800_000_000, body)
    assert good.startswith("v1=") and len(good) == 3 + 64
    assert signing.verify("k", "1800000000", good, body, now, 300) is None
    assert signing.verify("k", "1800000000", f"v1=dead, {good}", body, now, 300) is None
    refused = {
        "other secret": ("other", "1800000000", good, body),
        "other body": ("k", "1800000000", good, b'{"a": 2}'),
        "other time": ("k", "1800000001", good, body),
        "no timestamp": ("k", None, good, body),
        "bad timestamp": ("k", "18e8", good, body),
        "no signature": ("k", "1800000000", None, body),
        "other version": ("k", "1800000000", good.replace("v1=", "v2="), body),
        "not ascii": ("k", "1800000000", "v1=\xe9\xe9", body),
    }
    for why, (secret, stamp, signature, signed) in refused.items():
        assert signing.verify(secret, stamp, signature, signed, now, 300), why
    assert signing.problem("k", "1799999000", good, body, now, 300) is not None
    assert signing.problem("k", "1800000000", good, body, now + 301, 300)[0] == (  # type: ignore[index]
        "stale_timestamp")
    assert signing.problem("k", "1800000000", good, body, now - 301, 300)[0] == (  # type: ignore[index]
        "stale_timestamp")


def test_an_attachments_data_is_kept_in_the_chat_and_one_without_is_named(
        hooked: Gateway, callback: Callback, model_server: ScriptedModelServer) -> None:
    model_server.push(Reply(text="Read it."))
    answer = post(hooked, message("m-files", "", attachments=[
        {"name": "plan.txt", "data": base64.b64encode(b"Sow on Sunday.").decode()},
        {"name": "video.mp4"}]))
    assert answer.status_code == 202, answer.text
    api = hooked.client()
    api.wait(answer.json()["run_id"])
    sent = model_server.requests[-1].messages[-1]["content"]
    assert "Sow on Sunday." in sent and "video.mp4" in sent
    kept = api.http.get(f"/api/sessions/{answer.json()['chat']}/attachments").json()
    assert [(a["name"], a["sent"]) for a in kept["attachments"]] == [("plan.txt", True)]
    bad = post(hooked, message("m-bad", "x", attachments=[{"name": "a", "data": "@@"}]))
    assert bad.status_code == 422 and "not valid base64" in bad.json()["error"]["message"]
