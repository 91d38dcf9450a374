"""The models an endpoint offers, for the Settings page's model form (the owner's alone):

- `POST /api/models/available` `{provider, base_url, api_key | api_key_env, model_id}` →
  `{models: [names…], sentence}`: the endpoint's `GET /models`, asked with the key given, or
  the variable named, or (neither given) the key of the model `model_id` set up already, so
  editing a model lists with its key without the page ever holding it. An endpoint that
  cannot be listed is `502 models_unlisted`, a key variable not set `422 key_missing`, each
  with the sentence the form shows beside the model name (typing it stays possible).

The listing is awaited (`models.listing`: the SDK's own async client), never blocking the
event loop; the key is never logged, echoed or put in an error.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from hearth.config import ModelConfig, base_url_problem
from hearth.errors import Refusal
from hearth.models import listing
from hearth.models.registry import OLLAMA_BASE_URL, OLLAMA_KEY
from hearth.web.http.deps import EngineDep

router = APIRouter()


class Endpoint(BaseModel):
    """Where to list models: the form's provider, base URL and key (or key variable)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)
    provider: Literal["openai", "anthropic", "ollama"] = "openai"
    base_url: str | None = Field(None, max_length=500)
    api_key: str | None = Field(None, max_length=500, repr=False)
    api_key_env: str | None = Field(None, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    model_id: str | None = Field(None, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")

    @field_validator("base_url", "api_key", "api_key_env", "model_id", mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip().removeprefix("$") or None
        return value

    @field_validator("base_url")
    @classmethod
    def _web_address(cls, value: str | None) -> str | None:
        problem = None if value is None else base_url_problem(value)
        if problem is not None:
            raise PydanticCustomError("base_url", problem)
        return value.rstrip("/") if value else None


def _endpoint(body: Endpoint, known: ModelConfig | None) -> ModelConfig:
    """The model config to list with: the body's provider and URL, its key, else `known`'s."""
    key, key_env = body.api_key, body.api_key_env
    if key is None and key_env is None and known is not None:
        key, key_env = known.api_key, known.api_key_env
    if body.provider == "ollama":
        key = key if key or key_env else OLLAMA_KEY
    return ModelConfig(
        id=body.model_id or "listing", model="listing",
        provider="anthropic" if body.provider == "anthropic" else "openai",
        base_url=body.base_url or (OLLAMA_BASE_URL if body.provider == "ollama" else None),
        api_key=key, api_key_env=None if key else key_env)


@router.post("/api/models/available")
async def available(body: Endpoint, engine: EngineDep) -> dict[str, Any]:
    known = engine.snapshot.models.config_of(body.model_id) if body.model_id else None
    if body.model_id and known is None:
        raise Refusal("model_not_found", 404, f"There is no model called {body.model_id}.")
    endpoint = _endpoint(body, known)
    try:
        names = await listing.available(endpoint, os.environ)
    except listing.Unlisted as unlisted:
        status = 422 if unlisted.code == "key_missing" else 502
        raise Refusal(unlisted.code, status, unlisted.sentence) from unlisted
    count = f"{len(names)} model{'s' if len(names) != 1 else ''}"
    return {"models": names, "sentence": f"{count} offered by this endpoint."}
