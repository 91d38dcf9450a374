"""The documentation's generated parts hold (docs/gen/): the configuration, CLI and HTTP
references under docs/reference/ and the module map in docs/architecture.md are what the code
makes now, every setting of the config models is in the configuration reference, and the site
builds (`mkdocs build --strict`, as `make docs` runs it) with every page in its navigation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import Field, create_model

from docs.gen import config_reference, hooks, module_map, parts
from hearth import config
from tests.test_docs import site_pages

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_the_generated_parts_are_what_the_code_makes() -> None:
    """Before: no reference was made from the code, and the Layout section missed modules."""
    assert parts.stale() == [], "run `python -m docs.gen` (make docs) and commit what it writes"


def test_every_setting_of_the_config_models_is_in_the_reference() -> None:
    text = (DOCS / config_reference.PAGE).read_text(encoding="utf-8")
    assert config_reference.undocumented(text) == []
    listed = config_reference.documented(text)
    assert ("[gateway]", "port") in listed and ("[[models]]", "api_key_env") in listed
    assert ("[limits.agents.<name>]", "usd_per_day") in listed
    assert ("[channels.telegram]", "token") in listed
    assert len(listed) == len(list(config_reference.settings(config.Config)))


def test_positive_control_a_planted_setting_is_flagged() -> None:
    """A key added to a table the reference has, and a table it has not, are both flagged."""
    text = (DOCS / config_reference.PAGE).read_text(encoding="utf-8")
    gateway = create_model("PlantedGateway", __base__=config.GatewayConfig,
                           planted_knob=(int, Field(3, ge=0)))
    planted_table = create_model("PlantedTable", __base__=config._Section,
                                 depth=(int, 1))
    planted = create_model("PlantedConfig", __base__=config.Config,
                           gateway=(gateway, Field(default_factory=gateway)),
                           planted=(planted_table, Field(default_factory=planted_table)))
    assert config_reference.undocumented(text, planted) == [
        "[gateway] planted_knob", "[planted] depth"]
    assert "| `planted_knob` | `3` | int (≥ 0). |" in config_reference.render(planted)


def test_the_reference_names_the_environment_and_the_source_comments() -> None:
    text = config_reference.render()
    port = next(line for line in text.splitlines() if line.startswith("| `port` |"))
    assert "Environment: `HEARTH_GATEWAY_PORT`, `HEARTH_PORT`." in port and "| `8765` |" in port
    shell = next(line for line in text.splitlines()
                 if line.startswith("| `max_model_calls_per_turn` |"))
    assert "`HEARTH_LIMITS_MAX_MODEL_CALLS_PER_TURN`" in shell
    vision = next(line for line in text.splitlines() if line.startswith("| `vision` |"))
    assert "It reads images" in vision  # the comment beside the field in config.py
    secret = next(line for line in text.splitlines() if line.startswith("| `secret` |"))
    assert "the one `secret_env` names" in secret


# ---------------------------------------------------------------------- the module map

def _tree(tmp_path: Path) -> Path:
    package = tmp_path / "hearth"
    shutil.copytree(ROOT / "src" / "hearth", package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return package


def test_the_module_map_lists_every_module_of_the_tree() -> None:
    text = (DOCS / module_map.PAGE).read_text(encoding="utf-8")
    section = module_map.section(text)
    assert section == module_map.render(ROOT / "src" / "hearth")
    for path in (ROOT / "src" / "hearth").rglob("*.py"):
        if "versions" not in path.parts and path.name != "__init__.py":
            assert f"`{path.name}`" in section, path


def test_positive_control_a_module_added_without_the_map_is_caught(tmp_path: Path) -> None:
    package = _tree(tmp_path)
    committed = module_map.section((DOCS / module_map.PAGE).read_text(encoding="utf-8"))
    (package / "engine" / "turn" / "planted.py").write_text(
        '"""A planted module: what it owns. More words."""\n', encoding="utf-8")
    made = module_map.render(package)
    assert made != committed
    assert "        - `planted.py` — A planted module: what it owns." in made.splitlines()
    rewritten = module_map.rewrite((DOCS / module_map.PAGE).read_text(encoding="utf-8"), made)
    assert module_map.section(rewritten) == made and "## Which way imports point" not in made


def test_positive_control_a_module_without_a_docstring_is_refused(tmp_path: Path) -> None:
    package = _tree(tmp_path)
    (package / "tools" / "nameless.py").write_text("X = 1\n", encoding="utf-8")
    with pytest.raises(module_map.MissingDocstring, match="nameless.py"):
        module_map.render(package)


# ----------------------------------------------------------------------------- the site

def test_every_page_under_docs_is_in_the_navigation() -> None:
    written = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if "gen" not in p.parts}
    assert written | {"index.md", "contributing.md"} == set(site_pages())


def test_the_site_builds_offline_and_strict(tmp_path: Path) -> None:
    """`make docs`'s build: every link and anchor of every page resolves (strict), the README
    is the home page and CONTRIBUTING a page, with their links made the site's."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "-d", str(tmp_path / "site")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "make run" in home and 'href="architecture.html"' in home
    assert (tmp_path / "site" / "reference" / "configuration.html").is_file()
    architecture = (tmp_path / "site" / "architecture.html").read_text(encoding="utf-8")
    assert '<a href="contributing.html">CONTRIBUTING.md</a>' in architecture  # ../CONTRIBUTING.md
    assert '<a href="index.html">README</a>' in architecture  # ../README.md
    assert '<a href=".ci/run">' not in home  # a file of the repository: its text, no link


def test_the_site_makes_the_repository_links_its_own() -> None:
    """A link the pages write for the repository leads to the site's page; one to a file that
    is no page is kept as its text (no link that leads nowhere)."""
    readme = "See [models](docs/models.md#failover), [it](CONTRIBUTING.md), [ci](.ci/run)."
    assert hooks.site_links(readme, "README.md") == (
        "See [models](models.md#failover), [it](contributing.md), ci.")
    page = ("[home](../../README.md#set-up) [`x`](../../bench/README.md) [c](../configuration.md)"
            " `[code](../x.md)` [w](#here)")
    assert hooks.site_links(page, "docs/reference/cli.md") == (
        "[home](../index.md#set-up) `x` [c](../configuration.md) `[code](../x.md)` [w](#here)")


def test_lists_read_on_the_site_as_on_github() -> None:
    """A list right under a paragraph, and a code block under a `1. ` item, are blocks of the
    list for Python-Markdown as they are for GitHub."""
    text = "Intro:\n- a\n- b\n\n1. Run:\n\n   ```sh\n   make run\n   ```\n2. Next\n\nAfter."
    assert hooks.items_indented(hooks.lists_apart(text)) == (
        "Intro:\n\n- a\n- b\n\n1. Run:\n\n    ```sh\n    make run\n    ```\n2. Next\n\nAfter.")
