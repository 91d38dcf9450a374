"""The fixtures of tests/tools/: `site`, a local website on a free loopback port for web_fetch
to read (tests/support/web_site.py), stopped after the test; `outside`, a folder next to the
workspace holding a file (`SECRET`) no tool may read or change."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tools import SECRET
from tests.support.web_site import Site, serve


@pytest.fixture
def site() -> Iterator[Site]:
    yield from serve(Site())


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the workspace holding a file no tool may read or change."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    return folder
