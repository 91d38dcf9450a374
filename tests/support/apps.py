"""Apps the owner makes over the API: `app_token`, a new app's token, made once per gateway and
name, so a module's tests can each ask for the same app."""

from __future__ import annotations

from weakref import WeakKeyDictionary

from tests.gateway import Api

_made: WeakKeyDictionary[Api, dict[str, str]] = WeakKeyDictionary()


def app_token(api: Api, name: str, *allow: str) -> str:
    """The token of the app `name` with the permissions `allow`, made by the owner's `api` the
    first time it is asked for (on that client's gateway)."""
    tokens = _made.setdefault(api, {})
    if name not in tokens:
        answer = api.http.post("/api/apps", json={"name": name, "permissions": list(allow)})
        assert answer.status_code == 201, answer.text
        tokens[name] = answer.json()["token"]
    return tokens[name]
