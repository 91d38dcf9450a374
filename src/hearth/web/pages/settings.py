"""The dashboard's Settings page: models (add or edit one with every key a `[[models]]` entry
has, its name chosen from what the endpoint lists (`api.model_listing`, asked by
settings.js); Test with a real call, whose failure the models table then says; remove one
added here; a model added joins the chat and background chains only when asked), the chat
chain, named agents, spending limits (with what was spent against each), and your
name; the shell sandbox and the chat channels, as they
are (both set in config.toml).

Each change is kept in `$HEARTH_HOME/settings.json` (see `hearth.settings`; config.toml is
never written) and applied to the running gateway at once, so the next turn uses it. A bad
form answers this page with a sentence (422); an API key is never shown, logged or audited.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response

from hearth import settings
from hearth.config import ModelConfig
from hearth.engine.runtime import Engine
from hearth.engine.snapshot import Snapshot
from hearth.errors import Refusal
from hearth.models.breakers import BreakerView
from hearth.models.checked import Checked
from hearth.models.probe import probe
from hearth.settings import Settings, SettingsError
from hearth.web.http import spending
from hearth.web.http.auth import require_token
from hearth.web.http.deps import EngineDep
from hearth.web.pages import channels_view, settings_forms as forms
from hearth.web.pages.frame import page
from hearth.web.pages.settings_forms import Invalid
from hearth.web.pages.ui import form_of

pages = APIRouter(dependencies=[Depends(require_token)])

SAVED = {
    "model": "The model is added. Test it below.",
    "edited": "The model is saved; the next message uses it as it is now.",
    "removed": "The model is removed.",
    "chain": "The chat chain is saved; the next message uses it.",
    "agent": "The agent is saved.",
    "name": "Your name is saved; the agent is told it from your next message.",
    "app_revoked": "The app is revoked: its token is refused from now on.",
    "limits": "The spending limits are saved; the next model call is held to them.",
}
# where each saved change's sentence is shown (the anchor the page opens at)
SAVED_AT = {"model": "models", "edited": "models", "removed": "models", "chain": "chain",
            "agent": "agents", "name": "you", "app_revoked": "apps", "limits": "spending"}
# the section a form posted to /settings/<first segment> belongs to: a refusal opens it
SECTION_OF = {"models": "models", "chain": "models", "agents": "agents", "name": "account",
              "apps": "apps", "limits": "spending"}
MAX_CHAIN_SLOTS = 6
READ_ONLY = ("{} comes from config.toml, read as the gateway starts, so it is read-only "
             "here: Test works for it, and a model added here can take its place in the "
             "chains.")


@dataclass(frozen=True)
class ModelRow:
    id: str
    provider: str
    model: str
    base_url: str
    key: str  # where its key comes from, never the key
    source: str
    removable: bool  # added here: edited and removed here
    details: str = ""  # what it can do and costs, in a few words
    health: str = "answering"  # its breaker and last Test, in words
    health_why: str = ""  # the failed Test's sentence
    tone: str = "ok"  # ok, failed, skipped: how the State is drawn


def _path(request: Request) -> Path:
    return settings.path_in(request.app.state.home.root)


def key_line(model: ModelConfig, environ: Mapping[str, str]) -> str:
    """Where the model's key comes from, in words; never the key."""
    if model.api_key:
        return "key set"
    if model.api_key_env:
        found = "" if environ.get(model.api_key_env) else " (not set)"
        return f"key from ${model.api_key_env}{found}"
    return "no key"


def _rows(snapshot: Snapshot, kept: Settings) -> list[ModelRow]:
    """The models table: `snapshot.choices()`' models, in order, each with its breaker and
    its last Test."""
    added = {m.id for m in kept.models}
    from_file = {m.id for m in snapshot.config.models} - added
    rows = []
    for breaker in snapshot.breakers():
        model_id = breaker.model_id
        model = snapshot.models.config_of(model_id)
        if model is None:
            continue
        source = ("added here" if model_id in added else
                  "config.toml" if model_id in from_file else "found at start")
        health, why, tone = _health(breaker, snapshot.models.checks.last(model))
        rows.append(ModelRow(model_id, forms.KINDS[forms.kind_of(model)], model.model,
                             _shown_url(model.base_url), key_line(model, os.environ), source,
                             model_id in added, _details(model), health, why, tone))
    return rows


def _details(model: ModelConfig) -> str:
    """What the model can do and costs: "128k context · 8.2k out · vision · $3 / $15 per 1M
    tokens" (its prices in, then out)."""
    def tokens(count: int) -> str:
        return f"{count / 1000:,.1f}".removesuffix(".0") + "k" if count >= 1000 else str(count)

    parts = [f"{tokens(model.context_window)} context", f"{tokens(model.max_output_tokens)} out"]
    parts += ["vision"] if model.vision else []
    parts += [] if model.tools else ["no tools"]
    prices = (model.price_in_per_mtok, model.price_out_per_mtok)
    if prices != (None, None):
        shown = ["?" if p is None else f"${p:g}" for p in prices]
        parts.append(f"{shown[0]} / {shown[1]} per 1M tokens")
    return " · ".join(parts)


def _health(breaker: BreakerView, checked: Checked | None) -> tuple[str, str, str]:
    """A model's State in the models table: (its words, why, its tone): skipped while its
    breaker is open, failed after a failed Test (until a call or a Test answers again)."""
    since = time.strftime("%H:%M", time.localtime(breaker.since))
    if breaker.state == "open":
        return f"skipped since {since} ({breaker.failures} failures in a row)", "", "skipped"
    if breaker.state == "half-open":
        return f"being tried again (since {since})", "", "skipped"
    if checked is not None and not checked.answered and checked.at >= breaker.answered_at:
        at = time.strftime("%H:%M", time.localtime(checked.at))
        return f"failed its Test at {at}", checked.sentence, "failed"
    return "answering", "", "ok"


def _shown_url(url: str | None) -> str:
    """The base URL without any user or password written into it."""
    if not url:
        return "(the provider's)"
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="••••@" + parts.netloc.rsplit("@", 1)[1]).geturl()


async def _page(request: Request, engine: Engine, *, status: int = 200,
                **shown: Any) -> Response:
    try:  # a file read: off the event loop
        kept, problem = await settings.loaded(_path(request)), None
    except SettingsError as error:
        kept, problem = Settings(), str(error)
    snapshot = engine.snapshot  # one snapshot: the models, their chain and the agents shown
    config = snapshot.config
    choices = [m.id for m in config.models]  # a chain is of the models set up, not found
    chain = list(snapshot.models.chat_chain)
    slots = max(1, min(len(choices), MAX_CHAIN_SLOTS))
    shown.setdefault("model_form", {})
    shown.setdefault("editing", None)
    shown.setdefault("agent_form", {})
    posted = request.url.path.removeprefix("/settings/").split("/", 1)[0]
    shown.setdefault("section", SECTION_OF.get(posted))
    apps = await engine.reads.apps()
    shown.setdefault("limits_form", _limits_form(engine, apps))
    return await page(
        request, engine, "settings.html", status=status, problem=problem,
        models=_rows(snapshot, kept), kinds=forms.KINDS,
        ollama_url=forms.OLLAMA_BASE_URL, chain=chain, chain_choices=choices,
        background_chain=snapshot.models.own_chain("background"),
        chain_slots=[chain[i] if i < len(chain) else "" for i in range(slots)],
        agents=sorted(config.agents.items()), profiles=forms.PROFILES,
        user_name=config.agent.user_name or "", sandbox=engine.placement,
        channels=channels_view.rows(request), apps=apps,
        jobs_count=len(await engine.jobs.listing(None)), **shown)


def _limits_form(engine: Engine, apps: list[Any]) -> dict[str, Any]:
    """The Spending section: the limits in force, one row per agent and active app, each
    limit's standing, and the models no limit holds."""
    limits = engine.spending.limits()
    agents = sorted({"default", *engine.config.agents, *limits.agents})
    app_names = sorted({a.name for a in apps if a.revoked_at is None} | set(limits.apps))
    return {"limits": limits, "agents": agents, "apps": app_names,
            "standing": spending.standing(engine)["standing"],
            "unpriced": spending.unpriced(engine)}


@pages.post("/settings/limits")
async def save_limits(request: Request, engine: EngineDep) -> Response:
    form = await form_of(request)
    shown = _limits_form(engine, await engine.reads.apps())
    try:
        limits = forms.limits_of(form, shown["agents"], shown["apps"])
    except Invalid as bad:
        return await _page(request, engine, status=422, error=bad.sentence)
    refused = await _keep(request, engine,
                          settings.with_limits(engine.base_config, lambda _: limits),
                          {"what": "spending_limits"})
    if refused is not None:
        return refused
    return _saved("limits", "spending")


@pages.get("/settings")
async def settings_page(request: Request, engine: EngineDep,
                        saved: Annotated[str | None, Query(max_length=20)] = None,
                        agent: Annotated[str | None, Query(max_length=40)] = None,
                        model: Annotated[str | None, Query(max_length=64)] = None) -> Response:
    if model is not None:
        return await _edit_page(request, engine, model)
    editing = engine.config.agents.get(agent) if agent else None
    return await _page(request, engine, saved=SAVED.get(saved or ""), saved_what=saved,
                 saved_at=SAVED_AT.get(saved or ""),
                 agent_form={"name": agent if editing else "",
                             "system_prompt": (editing.system_prompt or "") if editing else "",
                             "voice": (editing.voice or "") if editing else "",
                             "profile": (editing.tools.profile or "") if editing else ""})


async def _keep(request: Request, engine: Engine, change: Callable[[Settings], Settings],
                what: dict[str, str], **shown: Any) -> Response | None:
    """Write the change to settings.json; None when kept, else the page saying why not."""
    def fitting(kept: Settings) -> Settings:
        changed = change(kept)
        settings.overlay(engine.base_config, changed)  # refuses what config.toml cannot take
        return changed

    try:
        kept = await settings.updated(_path(request), fitting)
        engine.adopt(kept)  # the next turn's snapshot; a running turn keeps its own
    except Invalid as refused:
        return await _page(request, engine, status=422, error=refused.sentence, **shown)
    except SettingsError as error:
        return await _page(request, engine, status=422, error=str(error), **shown)
    except OSError as error:
        return await _page(request, engine, status=503, **shown,
                     error=f"settings.json could not be written ({error.strerror}); nothing "
                           "was changed.")
    await engine.access.record_settings_change(what)
    return None


def _saved(what: str, anchor: str) -> Response:
    return RedirectResponse(f"/settings?saved={what}#{anchor}", status_code=303)


async def _edit_page(request: Request, engine: Engine, model_id: str) -> Response:
    """The page with the model form filled in with `model_id`, added here, to edit it."""
    model = engine.snapshot.models.config_of(model_id)
    if model is None:
        return await _page(request, engine, status=404,
                           error=f"There is no model called {model_id}.")
    try:
        kept = await settings.loaded(_path(request))
    except SettingsError as error:
        return await _page(request, engine, status=409, error=str(error))
    if not any(m.id == model_id for m in kept.models):
        return await _page(request, engine, status=409, error=READ_ONLY.format(model_id))
    return await _page(request, engine, editing=model_id, section="models",
                       model_form={**forms.form_of_model(model),
                                   **_membership(engine.snapshot, model_id)})


def _membership(snapshot: Snapshot, model_id: str) -> dict[str, str]:
    """The model form's chain boxes for `model_id`: ticked when the chain holds it."""
    models = snapshot.models
    return {"in_chat": "on" if model_id in models.chat_chain else "",
            "in_background": "on" if model_id in models.chain("background") else ""}


def _placing(snapshot: Snapshot, model_id: str, form: dict[str, str]
             ) -> Callable[[Settings], Settings]:
    """Put `model_id` in the chat chain and the background chain as the form's boxes say
    (unticked: not in it), against the chains `snapshot` runs on."""
    chat_now = list(snapshot.models.chat_chain) if snapshot.config.models else []
    background_now = snapshot.models.own_chain("background")
    return lambda kept: settings.placed(
        kept, model_id, chat_now, background_now,
        chat=form.get("in_chat") == "on", background=form.get("in_background") == "on")


def _refill(form: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in form.items() if k not in ("api_key", "csrf")}  # never the key


@pages.post("/settings/models")
async def add_model(request: Request, engine: EngineDep) -> Response:
    form = await form_of(request)
    refill = _refill(form)
    try:
        model = forms.model_of(form)
    except Invalid as bad:
        return await _page(request, engine, status=422, error=bad.sentence, model_form=refill)
    taken = {m.id for m in engine.config.models}
    placing = _placing(engine.snapshot, model.id, form)

    def change(kept: Settings) -> Settings:
        if model.id in taken or any(m.id == model.id for m in kept.models):
            raise Invalid(f"There is already a model called {model.id}; give this one "
                          "another id.")
        return placing(kept.model_copy(update={"models": [*kept.models, model]}))

    refused = await _keep(request, engine, change, {"what": "model_added", "model": model.id,
                                                    "provider": model.provider},
                          model_form=refill)
    if refused is not None:
        return refused
    return _saved("model", "models")


@pages.post("/settings/models/{model_id}")
async def edit_model(request: Request, model_id: str, engine: EngineDep) -> Response:
    """Change a model added here: every key but its id; a key left empty is kept."""
    form = {**await form_of(request), "id": model_id}
    refill, shown = _refill(form), {"editing": model_id, "section": "models"}
    existing = engine.snapshot.models.config_of(model_id)
    if existing is None:
        return await _page(request, engine, status=404,
                           error=f"There is no model called {model_id}.")
    try:
        model = forms.model_of(form, existing)
    except Invalid as bad:
        return await _page(request, engine, status=422, error=bad.sentence,
                           model_form=refill, **shown)
    placing = _placing(engine.snapshot, model_id, form)

    def change(kept: Settings) -> Settings:
        if not any(m.id == model_id for m in kept.models):
            raise Invalid(READ_ONLY.format(model_id))
        models = [model if m.id == model_id else m for m in kept.models]
        return placing(kept.model_copy(update={"models": models}))

    refused = await _keep(request, engine, change, {"what": "model_edited", "model": model_id,
                                                    "provider": model.provider},
                          model_form=refill, **shown)
    if refused is not None:
        return refused
    return _saved("edited", "models")


@pages.post("/settings/models/{model_id}/test")
async def test_model(request: Request, model_id: str, engine: EngineDep) -> Response:
    """One real, tiny call to the model; the page says what answered and how fast, or why not
    (and the models table, after, that its Test failed)."""
    models = engine.snapshot.models
    model = models.config_of(model_id)
    if model is None:
        return await _page(request, engine, status=404,
                           error=f"There is no model called {model_id}.")
    answered, sentence = await probe(model, os.environ)
    models.checks.record(model, answered, sentence)
    return await _page(request, engine, outcome=sentence, outcome_ok=answered)


@pages.post("/settings/models/{model_id}/remove")
async def remove_model(request: Request, model_id: str, engine: EngineDep) -> Response:
    """Remove a model added here (one from config.toml is read-only here)."""
    known = engine.snapshot.models.config_of(model_id) is not None

    def change(kept: Settings) -> Settings:
        if not any(m.id == model_id for m in kept.models):
            raise Invalid(READ_ONLY.format(model_id) if known
                          else f"There is no model called {model_id}.")

        def without(chain: list[str] | None) -> list[str] | None:
            return None if chain is None else [m for m in chain if m != model_id]

        return kept.model_copy(update={"models": [m for m in kept.models if m.id != model_id],
                                       "chat_chain": without(kept.chat_chain),
                                       "background_chain": without(kept.background_chain)})

    refused = await _keep(request, engine, change, {"what": "model_removed", "model": model_id})
    if refused is not None:
        return refused
    return _saved("removed", "models")


@pages.post("/settings/chain")
async def pick_chain(request: Request, engine: EngineDep) -> Response:
    form = await form_of(request)
    try:
        chain = forms.chain_of(form, [m.id for m in engine.config.models], MAX_CHAIN_SLOTS)
    except Invalid as bad:
        return await _page(request, engine, status=422, error=bad.sentence)
    refused = await _keep(request, engine,
                          lambda kept: kept.model_copy(update={"chat_chain": chain}),
                          {"what": "chat_chain", "chain": ",".join(chain)})
    if refused is not None:
        return refused
    return _saved("chain", "chain")


@pages.post("/settings/agents")
async def save_agent(request: Request, engine: EngineDep) -> Response:
    form = await form_of(request)
    refill = {k: form.get(k, "") for k in ("name", "system_prompt", "voice", "profile")}
    try:
        name, agent = forms.agent_of(form, engine.config.agents.get(form.get("name", "").strip()))
    except Invalid as bad:
        return await _page(request, engine, status=422, error=bad.sentence, agent_form=refill)
    refused = await _keep(request, engine,
                          lambda kept: kept.model_copy(update={"agents": {**kept.agents,
                                                                          name: agent}}),
                          {"what": "agent", "agent": name}, agent_form=refill)
    if refused is not None:
        return refused
    return _saved("agent", "agents")


@pages.post("/settings/name")
async def save_name(request: Request, engine: EngineDep) -> Response:
    try:
        name = forms.user_name_of(await form_of(request))
    except Invalid as bad:
        return await _page(request, engine, status=422, error=bad.sentence)
    refused = await _keep(request, engine,
                          lambda kept: kept.model_copy(update={"user_name": name}),
                          {"what": "user_name"})
    if refused is not None:
        return refused
    return _saved("name", "you")


@pages.post("/settings/apps/{name}/revoke")
async def revoke_app(request: Request, name: str, engine: EngineDep) -> Response:
    """Revoke an app's token (`hearth apps revoke`): refused from its next request on."""
    try:
        await engine.access.revoke_app(name)
    except Refusal as refused:
        return await _page(request, engine, status=refused.status, error=refused.sentence)
    return _saved("app_revoked", "apps")
