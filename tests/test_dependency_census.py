"""The dependency census: every third-party package src/hearth imports is declared in
pyproject.toml (the core or an extra), and an extra's package is imported at import time
only by its integration's own module, which nothing imports at import time (so the gateway's
start path imports no extra unless that integration is set up: channels/setup.py imports the
adapter after `hearth.extras.require`). The extras `hearth.extras` checks are pyproject's.

Each detector is proved on a planted tree first (its positive control).
"""

from __future__ import annotations

import ast

from hearth.extras import EXTRAS
from tests.support.dependency_census import (
    declared,
    distribution_of,
    eager_extras,
    extras_of,
    modules,
    undeclared,
)

# the modules that import an extra's package at import time: each is imported only by
# channels/setup.py's build, once its channel is set up and its extra found
INTEGRATIONS = {"hearth.channels.telegram": {"telegram"}, "hearth.channels.matrix": {"matrix"}}


def _planted(**sources: str) -> dict[str, ast.Module]:
    return {name.replace("__", "."): ast.parse(text) for name, text in sources.items()}


def test_detector_flags_a_planted_undeclared_import() -> None:
    planted = _planted(hearth__sneaky=(
        "import os\nimport fastapi\nfrom hearth import extras\n"
        "import hypothesis\n"  # installed, but only for the tests ([dev] is not declared)
        "def later():\n    from idna import encode\n"  # installed, pulled in by another
        "import left_pad_nowhere\n"))  # not installed at all
    found = undeclared(planted, declared())
    assert len(found) == 3, found
    named = [f.split(" ")[2].rstrip(",") for f in found]
    assert named == ["hypothesis", "idna", "left_pad_nowhere"], found


def test_every_third_party_import_is_declared() -> None:
    assert undeclared(modules(), declared()) == []


def test_detector_flags_a_planted_extra_imported_at_import_time() -> None:
    planted = _planted(
        hearth="",
        hearth__eager="import slack_sdk\n",
        hearth__chain="from hearth import eager\n",
        hearth__lazy="def start():\n    import telegram\n",
        hearth__typed="from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import nio\n",
        hearth__channels="",
        hearth__channels__telegram="import telegram\n",  # the integration's own module
        hearth__front="import hearth.channels.telegram\n",
        hearth__traced="from opentelemetry.sdk.trace import TracerProvider\n")
    found = eager_extras(planted, declared(), INTEGRATIONS)
    assert found == [
        "hearth.eager imports slack_sdk of the slack extra at import time",
        "hearth.chain imports slack_sdk of the slack extra at import time (through "
        "hearth.eager)",
        "hearth.front imports telegram of the telegram extra at import time (through "
        "hearth.channels.telegram)",
        "hearth.traced imports opentelemetry.sdk.trace of the telemetry extra at import time",
    ], found


def test_no_module_imports_an_extra_at_import_time_but_its_integration() -> None:
    assert eager_extras(modules(), declared(), INTEGRATIONS) == []


def test_the_extras_hearth_checks_are_pyprojects() -> None:
    """`require(extra)` looks for exactly the distributions pyproject's extra installs."""
    in_pyproject = extras_of()
    assert set(EXTRAS) == set(in_pyproject)
    for extra, needs in EXTRAS.items():
        assert {distribution_of(module) for module in needs.modules} == in_pyproject[extra], \
            extra


def test_the_extras_are_not_the_cores() -> None:
    """What an extra installs is not installed by the core as well (it would be no extra)."""
    core = {dist for dist, where in declared().items() if where == "core"}
    for extra, dists in extras_of().items():
        assert not dists & core, extra
