"""Census: nothing decides "owner" but the places that authenticate, and the readers of who is
acting read the principal, never a chat's creator or a line's marks.

Two rules over the source tree's AST, each proved on a planted violation first:
- the owner principal (`privacy.principal.OWNER`, or a `Principal("owner")` made by hand) is
  named only where a request or message is authenticated: the web's token and sign-in check
  (`web/http/auth.py`), a channel's owner list (`engine/intake/channel_inbound.py`) and the
  module that defines it. Everything else derives the principal from the work it continues (a
  run's, a job's, the asking run's);
- the code that decides what work may do on someone's behalf (the gate, learning, the memory
  and tool fences, reach, the stores' locks) never reads `created_by_app` or a `guest` mark
  to decide it: it reads the principal.
"""

from __future__ import annotations

import ast

from tests.support.census import found_by

AUTHENTICATE = {"web/http/auth.py", "engine/intake/channel_inbound.py", "privacy/principal.py"}
PRINCIPAL_MODULE = "hearth.privacy.principal"
READERS = ("engine/turn/approval/gate.py", "engine/background/chores.py",
           "engine/access/principals.py", "memory/", "tools/", "privacy/reach.py",
           "privacy/stores.py", "privacy/scope.py")


def owner_decided(name: str, tree: ast.Module) -> list[str]:
    """Places in `name` that name the owner principal outside the authenticating places."""
    if name in AUTHENTICATE:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == PRINCIPAL_MODULE and any(
                alias.name == "OWNER" for alias in node.names):
            found.append(f"{name}:{node.lineno} imports the owner principal")
        elif isinstance(node, ast.Attribute) and node.attr == "OWNER" and isinstance(
                node.value, ast.Name) and node.value.id in ("principals", "principal"):
            found.append(f"{name}:{node.lineno} names {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Principal") and \
                any(isinstance(a, ast.Constant) and a.value == "owner" for a in node.args):
            found.append(f"{name}:{node.lineno} makes the owner principal by hand")
    return found


def who_read_elsewhere(name: str, tree: ast.Module) -> list[str]:
    """Places in a reader of who is acting that decide it from a chat's creator or a
    `guest` mark instead of the principal."""
    if not name.startswith(READERS):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "created_by_app" and not (
                isinstance(node.value, ast.Attribute) and node.value.attr == "c"):
            found.append(f"{name}:{node.lineno} reads created_by_app")  # (a query's column
            # naming the principal's own chats is reach, not a decision of who acts)
        elif isinstance(node, ast.Constant) and node.value == "guest":
            found.append(f"{name}:{node.lineno} looks for a guest mark")
    return found


def test_detector_finds_the_owner_decided_anew() -> None:
    planted = ast.parse(
        "from hearth.privacy.principal import OWNER, Principal\n"
        "from hearth.privacy import principal as principals\n"
        "async def fire(engine, job):\n"
        "    await engine.send(job.key, job.prompt, principal=OWNER)\n"
        "    await engine.send(job.key, job.prompt, principal=principals.OWNER)\n"
        "    return Principal('owner')\n"
    )
    found = owner_decided("engine/background/scheduler.py", planted)
    assert len(found) == 3  # the import, the name, one by hand
    assert owner_decided("web/http/auth.py", planted) == []  # where the token is checked


def test_detector_finds_a_reader_that_decides_who_from_the_chat() -> None:
    planted = ast.parse(
        "async def permit(turn, chat, meta):\n"
        "    if chat.created_by_app is None and 'guest' not in meta:\n"
        "        return None\n"
    )
    assert len(who_read_elsewhere("engine/turn/approval/gate.py", planted)) == 2
    assert who_read_elsewhere("engine/views.py", planted) == []  # shows it, decides nothing


def test_only_the_authenticating_places_name_the_owner() -> None:
    assert found_by(owner_decided) == []


def test_the_readers_of_who_acts_read_the_principal() -> None:
    assert found_by(who_read_elsewhere) == []
