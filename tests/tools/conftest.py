"""The fixtures of tests/tools/: `site`, a local website on a free loopback port for web_fetch
to read (tests/support/web_site.py), stopped after the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.web_site import Site, serve


@pytest.fixture
def site() -> Iterator[Site]:
    yield from serve(Site())
