"""What the chat page says about its models, in Chromium: a chat's pick that cannot run is kept
and the answer says which model ran instead; a model that fails before anything was shown is
left for the next, said live and on the answer; "Compact now" in the chat's menu compacts what
the model reads and the chat says so. Screenshots of each into test-artifacts/."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Gateway  # noqa: E402

Shot = Callable[[Page, str], Path]
SignedIn = Callable[[Gateway], Page]
MORE_MODELS = """
[[models]]
id = "spare"
provider = "openai"
base_url = "{url}"
api_key = "sk-test"
model = "spare-model"

[[models]]
id = "keyless"
provider = "openai"
base_url = "{url}"
api_key_env = "HEARTH_TEST_NEVER_SET_KEY"
model = "keyless-model"

[chains]
chat = ["fake", "spare"]
"""


def _open(page: Page, gateway: Gateway, key: str) -> None:
    page.goto(f"{gateway.url}/chats/{key}")
    expect(page.locator("html[data-stream=open]")).to_have_count(1)


def _compact_now(page: Page, gateway: Gateway, key: str) -> None:
    _open(page, gateway, key)
    page.get_by_label("Chat options", exact=True).first.click()
    with page.expect_navigation():
        page.get_by_role("button", name="Compact now").click()


def test_the_page_says_which_model_answered_and_why(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer,
        signed_in: SignedIn, shot: Shot, console_errors: list[str]) -> None:
    gateway = gateway_factory(MORE_MODELS.format(url=model_server.openai_base_url))
    api = gateway.client()
    page = signed_in(gateway)

    picked = api.new_chat(model="keyless")  # a pick that cannot run: its key is not set
    model_server.push(Reply(text="From the chain."), model="fake-model")
    _open(page, gateway, picked)
    api.send(picked, "hello")
    note = page.locator(".item.assistant .model-note")
    expect(note).to_contain_text("instead of")
    expect(note).to_contain_text("keyless")
    page.reload()
    expect(page.locator(".item.assistant .model-note")).to_contain_text("instead of")
    shot(page, "chat-model-substitution")

    failing = api.new_chat()
    model_server.push(Reply(status=503), model="fake-model")
    model_server.push(Reply(text="From the spare."), model="spare-model")
    _open(page, gateway, failing)
    api.send(failing, "hello again")
    expect(page.locator(".item.assistant .markdown")).to_have_text("From the spare.")
    expect(page.locator(".item.assistant .model-note")).to_have_text(
        "Answered by spare: fake failed (HTTP 503).")
    shot(page, "chat-failover")
    assert console_errors == []


def test_compact_now_compacts_and_the_chat_says_so(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer,
        signed_in: SignedIn, shot: Shot, console_errors: list[str]) -> None:
    window = "context_window = 4000\nmax_output_tokens = 512\ntools = false\n"
    gateway = gateway_factory(window)  # the config's model section ends in these keys
    model_server.default = Reply(text="By the south wall. " + "More advice on spacing. " * 8)
    api = gateway.client()
    key = api.new_chat()
    page = signed_in(gateway)
    for n in range(1, 6):
        asked = (f"Question {n}: where should bed {n} go, and what grows well beside it? "
                 + "Some detail about the soil and the light. " * 5)
        api.wait(api.send(key, asked)["run_id"])
        if n == 1:  # only an opening: nothing to fold yet, and the page says so
            _compact_now(page, gateway, key)
            expect(page.get_by_role("status").filter(has_text="Nothing to compact yet")
                   ).to_have_count(1)
    _compact_now(page, gateway, key)
    notice = page.locator(".item.notice", has_text="Conversation compacted")
    expect(notice).to_have_count(1)
    expect(notice).to_contain_text("freed")
    shot(page, "chat-compacted")
    assert console_errors == []
