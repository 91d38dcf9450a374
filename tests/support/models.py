"""Model configs for the tests: `model`, one `[[models]]` entry on the scripted server, as
config.toml's text; `priced_config`, two models on the scripted server, `priced` (the chat
chain's, with a price per million tokens) and `plain` (none), for the tests of what calls
cost."""

from __future__ import annotations

from hearth.config import Config
from tests.fakes.model_server import ScriptedModelServer


def model(model_id: str, url: str, name: str, vision: bool = False) -> str:
    """A `[[models]]` entry of config.toml for the scripted server at `url`."""
    return (f'[[models]]\nid = "{model_id}"\nprovider = "openai"\nbase_url = "{url}"\n'
            f'api_key = "sk-test"\nmodel = "{name}"\n' + ("vision = true\n" if vision else "")
            + "\n")


def priced_config(server: ScriptedModelServer, **chains: list[str]) -> Config:
    """`priced` (2 in, 10 out, per million tokens) and `plain`; the chat chain is `priced`, and
    `chains` adds others (background=["plain"]); learning after every turn, so its calls are
    there to count."""
    base = {"provider": "openai", "base_url": server.openai_base_url, "api_key": "sk-test"}
    return Config.model_validate({
        "models": [
            {**base, "id": "priced", "model": "m-priced", "price_in_per_mtok": 2.0,
             "price_out_per_mtok": 10.0},
            {**base, "id": "plain", "model": "m-plain"},
        ],
        "chains": {"chat": ["priced"], **chains},
        "learning": {"every_turns": 1},
    })
