"""Serving the app with uvicorn, ending live streams the moment a stop is asked for.

uvicorn waits for open connections before it shuts the app down; an SSE stream never ends on
its own, so without this every stop would wait out the whole grace period.
"""

from __future__ import annotations

import asyncio
from types import FrameType

import uvicorn
from fastapi import FastAPI

from hearth.engine.runtime import Engine

GRACE_SECONDS = 10


class GatewayServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, engine: Engine) -> None:
        super().__init__(config)
        self._engine = engine

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        try:
            asyncio.get_running_loop().call_soon_threadsafe(self._engine.stop_admitting)
        except RuntimeError:  # no loop running yet, so nothing is streaming
            pass
        super().handle_exit(sig, frame)


def serve(app: FastAPI, *, host: str, port: int) -> None:
    config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                            timeout_graceful_shutdown=GRACE_SECONDS)
    GatewayServer(config, app.state.engine).run()
