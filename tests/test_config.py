"""Configuration: the file, the HEARTH_* overrides, model fall-backs, and what a bad or empty
configuration does to the gateway."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from hearth import settings
from hearth.config import Config, ConfigError, ModelConfig, load_config
from hearth.models.registry import NO_MODEL_SENTENCE, ModelRegistry, fallback_models
from hearth.models.types import Message, ModelRequest
from hearth.settings import SettingsError
from hearth.web.pages.settings_forms import Invalid, model_of
from tests.fakes.model_server import Recorded, Reply, ScriptedModelServer
from tests.gateway import Gateway, kinds

DEAD = "http://127.0.0.1:9"
NO_OLLAMA = {"HEARTH_OLLAMA_URL": DEAD}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={} if environ is None else environ)
    return str(caught.value)


# ---------------------------------------------------------------- the file


def test_a_missing_file_gives_the_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path / "absent.toml", environ={})
    assert config == Config()
    assert (config.gateway.host, config.gateway.port) == ("127.0.0.1", 8765)
    assert config.models == [] and config.chains.chat == []
    assert config.limits.max_model_calls_per_turn == 50
    assert config.limits.recovery_attempts == 3


def test_a_full_file_is_read(tmp_path: Path) -> None:
    path = write(tmp_path, """
[gateway]
host = "0.0.0.0"
port = 9000

[[models]]
id = "local"
provider = "openai"
base_url = "http://127.0.0.1:11434/v1"
api_key_env = "OPENAI_API_KEY"
model = "llama3.1"
context_window = 32000

[[models]]
id = "claude"
provider = "anthropic"
model = "claude-sonnet-4-5"

[chains]
chat = ["local", "claude"]

[limits]
max_tool_calls_per_turn = 7
""")
    config = load_config(path, environ={})
    assert (config.gateway.host, config.gateway.port) == ("0.0.0.0", 9000)
    assert [(m.id, m.provider, m.model) for m in config.models] == [
        ("local", "openai", "llama3.1"), ("claude", "anthropic", "claude-sonnet-4-5")]
    assert config.models[0].context_window == 32000
    assert config.chains.chat == ["local", "claude"]
    assert config.limits.max_tool_calls_per_turn == 7


def test_a_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[gateway\nport = 1\n")
    message = error_of(path)
    assert str(path) in message and "not valid TOML" in message


def test_an_unknown_key_is_named(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "[gateway]\nprot = 1\n"))
    assert "gateway.prot" in message and "not a setting" in message
    assert str(tmp_path / "config.toml") in message


def test_an_unknown_section_is_named(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "[gatway]\nport = 1\n"))
    assert "gatway" in message and "not a setting" in message


def test_a_wrong_type_is_named(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, '[gateway]\nport = "x"\n'))
    assert "gateway.port" in message and "integer" in message


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_a_port_out_of_range_is_refused(tmp_path: Path, port: int) -> None:
    message = error_of(write(tmp_path, f"[gateway]\nport = {port}\n"))
    assert "gateway.port" in message


def test_a_model_with_an_unknown_provider_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, '[[models]]\nid = "a"\nprovider = "grok"\nmodel = "m"\n')
    message = error_of(path)
    assert "models.0.provider" in message
    assert "openai" in message and "anthropic" in message


def test_a_chain_naming_an_unknown_model_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, '[[models]]\nid = "a"\nmodel = "m"\n\n[chains]\nchat = ["a", "b"]\n')
    message = error_of(path)
    assert "chains.chat" in message and "'b'" in message


def test_a_duplicate_model_id_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[[models]]\nid = "a"\nmodel = "m"\n\n[[models]]\nid = "a"\n'
                           'model = "n"\n')
    message = error_of(path)
    assert "'a'" in message and "twice" in message


SCHEME_FIX = "base_url must start with http:// or https://, e.g. http://localhost:11434/v1"


@pytest.mark.parametrize("url", ["localhost:11434/v1", "127.0.0.1:8000", "ftp://host/v1"])
def test_a_base_url_without_its_scheme_is_refused_naming_the_model_and_the_fix(
        tmp_path: Path, url: str) -> None:
    path = write(tmp_path, f'[[models]]\nid = "local"\nbase_url = "{url}"\nmodel = "m"\n')
    message = error_of(path)
    assert f'Model "local": {SCHEME_FIX}' in message and str(path) in message


def test_a_base_url_with_no_host_or_a_bad_port_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[[models]]\nid = "local"\nbase_url = "http://:99999/v1"\n'
                           'model = "m"\n')
    assert 'Model "local": base_url must be one web address with a host' in error_of(path)


def test_a_good_base_url_is_kept_as_given(tmp_path: Path) -> None:
    url = "https://user:pw@[::1]:8443/v1/"
    path = write(tmp_path, f'[[models]]\nid = "local"\nbase_url = "{url}"\nmodel = "m"\n')
    assert load_config(path, environ={}).models[0].base_url == url


def test_the_settings_file_and_the_form_refuse_it_with_the_same_sentence(tmp_path: Path) -> None:
    """One validator: settings.json's models and the Settings page's form say what
    config.toml's say (`config.base_url_problem`)."""
    kept = tmp_path / "settings.json"
    kept.write_text('{"models": [{"id": "dash", "model": "m", "base_url": "localhost:1/v1"}]}',
                    encoding="utf-8")
    with pytest.raises(SettingsError) as bad_file:
        settings.load(kept)
    assert f'Model "dash": {SCHEME_FIX}' in str(bad_file.value)
    with pytest.raises(Invalid) as bad_form:
        model_of({"kind": "openai", "id": "dash", "model": "m",
                  "base_url": "localhost:11434/v1"})
    assert bad_form.value.sentence == f"{SCHEME_FIX}."


# ---------------------------------------------------------------- HEARTH_* overrides


def test_hearth_port_and_host_override_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[gateway]\nhost = "127.0.0.1"\nport = 8000\n')
    config = load_config(path, environ={"HEARTH_PORT": "9999", "HEARTH_HOST": "0.0.0.0"})
    assert (config.gateway.host, config.gateway.port) == ("0.0.0.0", 9999)
    # and nothing else is touched; without the variables the file stands
    assert load_config(path, environ={}).gateway.port == 8000


def test_a_limit_is_overridden_from_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, "[limits]\nmax_model_calls_per_turn = 20\nrecovery_attempts = 5\n")
    config = load_config(path, environ={"HEARTH_LIMITS_MAX_MODEL_CALLS_PER_TURN": "3"})
    assert config.limits.max_model_calls_per_turn == 3
    assert config.limits.recovery_attempts == 5


def test_a_bad_environment_value_names_the_variable(tmp_path: Path) -> None:
    message = error_of(tmp_path / "absent.toml", {"HEARTH_PORT": "abc"})
    assert "HEARTH_PORT" in message and "gateway.port" in message


def test_an_error_names_the_variable_that_holds_the_bad_value(tmp_path: Path) -> None:
    environ = {"HEARTH_PORT": "9999", "HEARTH_GATEWAY_PORT": "abc"}
    try:
        config = load_config(tmp_path / "absent.toml", environ=environ)
    except ConfigError as error:  # HEARTH_GATEWAY_PORT won: it must be the one blamed
        assert "HEARTH_GATEWAY_PORT" in str(error)
        assert "from HEARTH_PORT)" not in str(error)
    else:  # HEARTH_PORT (the documented name) won
        assert config.gateway.port == 9999


# ---------------------------------------------------------------- model fall-backs


def test_no_key_and_no_ollama_finds_nothing() -> None:
    assert fallback_models(NO_OLLAMA) == []
    assert ModelRegistry.from_config(Config(), NO_OLLAMA).ids() == []
    assert ModelRegistry.from_config(Config(), NO_OLLAMA).for_chat() is None


def test_openai_key_gives_an_openai_model() -> None:
    found = fallback_models({"OPENAI_API_KEY": "sk-o"}, probe_ollama=False)
    assert [(m.id, m.provider) for m in found] == [("openai", "openai")]
    assert found[0].api_key_env == "OPENAI_API_KEY"


def test_anthropic_key_gives_an_anthropic_model() -> None:
    found = fallback_models({"ANTHROPIC_API_KEY": "sk-a"}, probe_ollama=False)
    assert [(m.id, m.provider) for m in found] == [("anthropic", "anthropic")]


def test_both_keys_give_both_in_order() -> None:
    environ = {"ANTHROPIC_API_KEY": "sk-a", "OPENAI_API_KEY": "sk-o", **NO_OLLAMA}
    assert [m.id for m in fallback_models(environ, probe_ollama=False)] == ["openai", "anthropic"]
    registry = ModelRegistry.from_config(Config(), environ)
    assert registry.ids() == ["openai", "anthropic"]
    assert registry.chat_chain == ["openai", "anthropic"]


def test_a_fallback_base_url_without_its_scheme_leaves_that_model_out_saying_why(
        caplog: pytest.LogCaptureFixture) -> None:
    environ = {"OPENAI_API_KEY": "sk-o", "OPENAI_BASE_URL": "localhost:11434/v1",
               "ANTHROPIC_API_KEY": "sk-a", "HEARTH_ANTHROPIC_MODEL": ""}
    with caplog.at_level("WARNING", logger="hearth.models.registry"):
        found = fallback_models(environ, probe_ollama=False)
    assert [(m.id, m.model) for m in found] == [("anthropic", "claude-sonnet-4-5")]
    assert ("OPENAI_BASE_URL must start with http:// or https://, e.g. "
            "http://localhost:11434/v1; until it does, OPENAI_API_KEY gives no model."
            ) in caplog.messages


def test_an_answering_ollama_is_picked_up(model_server: ScriptedModelServer) -> None:
    model_server.ollama_tags = ["llama3.1", "qwen2.5"]
    found = fallback_models({"HEARTH_OLLAMA_URL": model_server.url})
    assert len(found) == 1
    ollama = found[0]
    assert (ollama.id, ollama.provider, ollama.model) == ("ollama", "openai", "llama3.1")
    assert ollama.base_url == f"{model_server.url}/v1"
    registry = ModelRegistry.from_config(Config(), {"HEARTH_OLLAMA_URL": model_server.url})
    assert registry.ids() == ["ollama"]
    assert not ollama.vision  # Ollama did not say it reads images
    model_server.ollama_capabilities = ["completion", "vision"]
    assert fallback_models({"HEARTH_OLLAMA_URL": model_server.url})[0].vision


def test_an_ollama_with_no_models_or_no_answer_gives_nothing(
        model_server: ScriptedModelServer) -> None:
    assert fallback_models(NO_OLLAMA) == []
    model_server.ollama_tags = []
    assert fallback_models({"HEARTH_OLLAMA_URL": model_server.url}) == []
    model_server.ollama_tags = None  # 404
    assert fallback_models({"HEARTH_OLLAMA_URL": model_server.url}) == []


def test_configured_models_win_over_every_fallback(model_server: ScriptedModelServer) -> None:
    config = Config(models=[ModelConfig(id="mine", model="m", base_url="http://x/v1")])
    environ = {"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a",
               "HEARTH_OLLAMA_URL": model_server.url}
    registry = ModelRegistry.from_config(config, environ)
    assert registry.ids() == ["mine"] and registry.chat_chain == ["mine"]


def test_the_api_key_never_shows_in_repr() -> None:
    secret = "sk-very-secret-0123456789"
    model = ModelConfig(id="m", model="x", api_key=secret)
    assert model.resolved_api_key() == secret
    assert secret not in repr(model) and secret not in str(model)
    assert secret not in repr(Config(models=[model]))
    environ = {"OPENAI_API_KEY": secret, "ANTHROPIC_API_KEY": secret}
    for found in fallback_models(environ, probe_ollama=False):
        assert secret not in repr(found)


def _first_call(registry: ModelRegistry, server: ScriptedModelServer) -> Recorded:
    provider = registry.for_chat()
    assert provider is not None

    async def drain() -> None:
        async for _event in provider.stream(
                ModelRequest(messages=[Message("user", "hi")], tools=[])):
            pass

    asyncio.run(drain())
    return server.calls("/v1/chat/completions")[0]


def test_a_fallback_is_called_with_the_key_it_was_found_by(
        model_server: ScriptedModelServer) -> None:
    environ = {"OPENAI_API_KEY": "sk-from-environ",
               "OPENAI_BASE_URL": model_server.openai_base_url, **NO_OLLAMA}
    recorded = _first_call(ModelRegistry.from_config(Config(), environ), model_server)
    assert recorded.headers["authorization"] == "Bearer sk-from-environ"


# ---------------------------------------------------------------- the gateway


def test_the_gateway_does_not_start_on_a_bad_config(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[gateway]\nprot = 1\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "hearth", "gateway"], env=Gateway(home).env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "gateway.prot" in done.stderr and "not a setting" in done.stderr
    assert not (home / "hearth.db").exists()


def test_with_no_model_a_turn_ends_saying_how_to_add_one(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(model=False)
    health = httpx.get(f"{gateway.url}/healthz", timeout=5).json()
    assert health["ok"] is True and health["models"] == []
    api = gateway.client()
    key = api.new_chat()
    admitted = api.http.post(f"/api/sessions/{key}/messages", json={"text": "hello?"})
    assert admitted.status_code == 202, admitted.text
    run = api.wait(admitted.json()["run_id"])
    assert (run["status"], run["ending"]) == ("error", "no_model")
    sentence = run["sentence"]
    assert sentence == NO_MODEL_SENTENCE
    assert "OPENAI_API_KEY" in sentence and "config.toml" in sentence
    messages = api.messages(key)
    assert kinds(messages) == ["user", "notice"]
    assert messages[0]["text"] == "hello?"
    assert messages[1]["text"] == sentence
    assert model_server.requests == []


def test_an_ollama_fallback_answers_end_to_end(
        gateway_factory: Callable[..., Gateway], model_server: ScriptedModelServer) -> None:
    gateway = gateway_factory(model=False, env={"HEARTH_OLLAMA_URL": model_server.url})
    assert httpx.get(f"{gateway.url}/healthz", timeout=5).json()["models"] == ["ollama"]
    model_server.push(Reply(text="Hello from llama."))
    api = gateway.client()
    key = api.new_chat()
    run = api.wait(api.send(key, "hi")["run_id"])
    assert run["status"] == "complete", run
    assert run["model"] == "ollama"
    calls = model_server.calls("/v1/chat/completions")
    assert calls and all(c.model == "llama3.1" for c in calls)
    assert calls[0].headers["authorization"] == "Bearer ollama"
    assert calls[0].messages[-1] == {"role": "user", "content": "hi"}
    messages = api.messages(key)
    assert kinds(messages) == ["user", "assistant"]
    assert messages[-1]["text"] == "Hello from llama."

