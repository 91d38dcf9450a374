"""The dashboard's own files (`/static`): served so that a browser never draws a page of one
version with a stylesheet or script of another.

Every answer says `Cache-Control: no-cache`: the browser keeps the file but asks again each
time it uses it, and an unchanged file costs a 304 (its ETag). The pages name each file with
its content's hash (`asset`, e.g. `/static/hearth.css?v=3f9a1c0b2e`), so a changed file is a
new address even to a cache that did not ask."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope


class RevalidatedFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        answer = await super().get_response(path, scope)
        answer.headers["Cache-Control"] = "no-cache"
        return answer


def asset_url(folder: Path, name: str) -> str:
    """`/static/<name>?v=<hash of its bytes>`, read once per file and process."""
    return f"/static/{name}?v={_digest(folder / name)}"


@functools.cache
def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:10]
