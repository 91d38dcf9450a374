"""A model whose named key is missing: said once at the gateway's start, said again by each
turn that uses it, and never called with a placeholder key in its place.

The gateway is served in-process (`tests.inprocess`) on a scripted model server, which records
every request it gets: a model with a missing key must get none.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from hearth.config import Config, ModelConfig
from hearth.models import setup
from hearth.models.probe import probe
from hearth.models.registry import build_provider
from hearth.models.types import KeyMissing, Message, ModelRequest
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Gateway
from tests.support.dashboard import Page

MISSING = ("Model \"gpt\": OPENAI_KEY is not set in the gateway's environment; set it and "
           "restart, or remove the model.")
EMPTY = ("Model \"claude\": CLAUDE_KEY is empty in the gateway's environment; set it and "
         "restart, or remove the model.")
ENV_KEY = "sk-from-the-environment-0123456789"


def _models(url: str) -> str:
    """config.toml's entries: `gpt` names an unset variable, `claude` an empty one, `ok` has
    its key."""
    return (
        f'[[models]]\nid = "gpt"\nbase_url = "{url}/v1"\napi_key_env = "OPENAI_KEY"\n'
        'model = "gpt-test"\n\n'
        f'[[models]]\nid = "claude"\nprovider = "anthropic"\nbase_url = "{url}"\n'
        'api_key_env = "CLAUDE_KEY"\nmodel = "claude-test"\n\n'
        f'[[models]]\nid = "ok"\nbase_url = "{url}/v1"\napi_key_env = "OK_KEY"\n'
        'model = "ok-test"\n'
    )


def test_problems_name_each_model_whose_named_key_is_missing() -> None:
    config = Config(models=[
        ModelConfig(id="gpt", model="m", api_key_env="OPENAI_KEY"),
        ModelConfig(id="claude", provider="anthropic", model="m", api_key_env="CLAUDE_KEY"),
        ModelConfig(id="ok", model="m", api_key_env="OK_KEY"),
        ModelConfig(id="given", model="m", api_key="sk-given-0123456789",
                    api_key_env="OPENAI_KEY"),  # a key given outright wins: nothing missing
        ModelConfig(id="keyless", model="m", base_url="http://127.0.0.1:9/v1"),
    ])
    environ = {"CLAUDE_KEY": "  ", "OK_KEY": "sk-ok-0123456789"}
    assert setup.problems(config, environ) == [MISSING, EMPTY]
    assert setup.problems(config, {"OPENAI_KEY": "a", "CLAUDE_KEY": "b", "OK_KEY": "c"}) == []


def test_the_start_warns_once_per_model_and_its_turns_say_the_same_without_calling(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(config=_models(model_server.url), model=False,
                              env={"CLAUDE_KEY": "", "OK_KEY": "sk-ok-0123456789"})
    log = gateway.output()
    assert log.count(MISSING) == 1 and log.count(EMPTY) == 1, log
    assert f"WARNING hearth.engine.compose: {MISSING}" in log
    assert 'Model "ok"' not in log

    api = gateway.client()
    for model_id, variable in (("gpt", "OPENAI_KEY"), ("claude", "CLAUDE_KEY")):
        # a pick that cannot run is kept: the turn runs on the chain and says so
        model_server.push(Reply(text="fine"))
        key = api.new_chat(model=model_id)
        run = api.wait(api.send(key, "hello")["run_id"])
        assert run["status"] == "complete", run
        meta = api.messages(key)[-1]["meta"]
        assert meta["model_substitution"] == (
            f"Ran on ok instead of this chat's pick {model_id}: its key ({variable}) is not set "
            "in the gateway's environment.")
        chat = api.http.get(f"/api/sessions/{key}").json()["session"]
        assert chat["model"] == model_id  # never rewritten
    # no placeholder key (nor any) was sent for them: only `ok`, with its own
    assert {c.headers["authorization"] for c in model_server.requests} == {
        "Bearer sk-ok-0123456789"}
    model_server.requests.clear()

    model_server.push(Reply(text="fine"))  # the model that has its key is called with it
    run = api.wait(api.send(api.new_chat(model="ok"), "hello")["run_id"])
    assert run["status"] == "complete", run
    [call] = model_server.requests
    assert call.headers["authorization"] == "Bearer sk-ok-0123456789"


def test_a_missing_key_gets_no_sdk_client_and_its_call_raises_the_sentence(
        model_server: ScriptedModelServer) -> None:
    model = ModelConfig(id="gpt", model="gpt-test", base_url=model_server.openai_base_url,
                        api_key_env="OPENAI_KEY")
    provider = build_provider(model, {})
    assert isinstance(provider, setup.NoKey)
    assert (provider.model_id, provider.model_name, provider.provider) == (
        "gpt", "gpt-test", "openai")

    async def call() -> None:
        async for _event in provider.stream(ModelRequest([Message("user", "hi")], [])):
            pass

    with pytest.raises(KeyMissing) as raised:
        asyncio.run(call())
    assert raised.value.sentence == MISSING
    assert model_server.requests == []


def test_the_settings_test_of_such_a_model_says_the_sentence(
        model_server: ScriptedModelServer) -> None:
    model = ModelConfig(id="gpt", model="gpt-test", base_url=model_server.openai_base_url,
                        api_key_env="OPENAI_KEY")
    answered, sentence = asyncio.run(probe(model, {}))
    assert not answered and sentence == f"gpt did not answer: {MISSING}"
    assert model_server.requests == []


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_model_set_up_without_a_key_never_sends_the_environments_key(
        model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch,
        provider: str) -> None:
    """Both SDKs read OPENAI_API_KEY / ANTHROPIC_API_KEY when given no key: a keyless local
    model would hand the user's OpenAI key to whatever server its base_url names."""
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)
    url = model_server.openai_base_url if provider == "openai" else model_server.anthropic_base_url
    model = ModelConfig(id="local", provider=provider, model="m", base_url=url)
    answered, sentence = asyncio.run(probe(model, {"OPENAI_API_KEY": ENV_KEY}))
    assert answered, sentence
    [call] = model_server.requests
    sent = " ".join(call.headers.values())
    assert ENV_KEY not in sent
    assert setup.KEYLESS in sent


def test_a_missing_key_ends_each_turn_naming_the_fix_and_never_opens_a_breaker(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    """The chain's one model has no key: every turn, however many, says which variable to set
    and how, and never that a breaker is open or that sending again would help. Before, the
    fifth turn read "its breaker is open after 4 failures … send it again"."""
    only = (f'[[models]]\nid = "gpt"\nbase_url = "{model_server.url}/v1"\n'
            'api_key_env = "OPENAI_KEY"\nmodel = "gpt-test"\n')
    gateway = gateway_factory(config=only, model=False)
    api = gateway.client()
    key = api.new_chat()
    for _turn in range(6):
        run = api.wait(api.send(key, "hello")["run_id"])
        assert (run["status"], run["ending"]) == ("error", "key_missing"), run
        assert MISSING in run["sentence"]
        assert "breaker" not in run["sentence"] and "again" not in run["sentence"], run
    assert model_server.requests == []
    shown = Page(gateway).html(key)
    assert "OPENAI_KEY is not set" in shown and ">Retry</button>" not in shown
