"""A Hearth gateway served from inside the test process, with the interface of the subprocess
`tests.gateway.Gateway`: starting one costs no interpreter and no imports.

The app is built as `hearth gateway` builds it (`create_app(home, load_config(...))`) and served by
the same server (`hearth.web.http.server.gateway_server`: its protocol, header limit and shutdown)
on a free 127.0.0.1 port, from a thread of its own that runs the server's event loop, lifespan on.
uvicorn installs signal handlers only from the main thread, so none is installed here; `stop()` asks
the server to exit the way a SIGTERM does (`handle_exit`, on its loop: admissions end and the open
event streams close), and the lifespan's shutdown closes the engine and its database before the
thread ends.

The process's environment is set while the gateway runs as the subprocess's would be (HEARTH_*
cleared, HEARTH_HOME, HEARTH_TOKEN, HEARTH_OLLAMA_URL, then `env`), and put back at its stop.

What this cannot be: a crash. `kill()` is a stop that does not wait for running turns (they are
cancelled at once and left in the store), never an `os._exit`; a test that needs a real kill, a
signal, the process's files or its exit keeps the subprocess (`process=True`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from pathlib import Path

import pytest
from fastapi import FastAPI

from hearth.clock import Clock
from hearth.config import load_config
from hearth.engine.compose import build_engine
from hearth.home import Home
from hearth.logs import LOG_FORMAT
from hearth.web.app import create_app
from hearth.web.http.server import GatewayServer, gateway_server
from tests.gateway import Gateway
from tests.support.store import seed_home

LOGGERS = ("hearth", "uvicorn")  # whose records make the gateway's log
ENV_PREFIXES = ("HEARTH_", "OPENAI_", "ANTHROPIC_")  # what the subprocess does not inherit
STOP_SECONDS = 30.0  # the server's own grace (10 s) and the turns' (10 s), with room

_levels_lock = threading.Lock()
_levels_held = 0  # gateways running: while any is, the `hearth` logger passes INFO records
_level_before = logging.NOTSET


def _hold_info_level() -> None:
    global _levels_held, _level_before
    with _levels_lock:
        if _levels_held == 0:
            _level_before = logging.getLogger("hearth").level
            logging.getLogger("hearth").setLevel(logging.INFO)  # as basicConfig(level=INFO)
        _levels_held += 1


def _release_info_level() -> None:
    global _levels_held
    with _levels_lock:
        _levels_held -= 1
        if _levels_held == 0:
            logging.getLogger("hearth").setLevel(_level_before)


class InProcessGateway(Gateway):
    """`hearth gateway` in a thread of this process, with its own HEARTH_HOME."""

    def __init__(self, home: Path, env: dict[str, str] | None = None,
                 clock: Clock | None = None) -> None:
        super().__init__(home, env)
        self.clock = clock  # the engine's timed loops wait on it (default: the real one)
        self.app: FastAPI | None = None
        self.server: GatewayServer | None = None
        self.thread: threading.Thread | None = None
        self.failure: BaseException | None = None
        self._environ: pytest.MonkeyPatch | None = None
        self._handler: logging.Handler | None = None

    # ------------------------------------------------------------------ the interface

    def start(self, wait: bool = True) -> Gateway:
        if self.thread is not None and self.thread.is_alive():
            raise AssertionError("this gateway is already running")
        self._ended()  # a run that ended by itself, unasked, gives its environment back first
        self.app, self.server, self.failure = None, None, None
        self._set_environment()
        seed_home(self.home)  # the template store (tests/support/store.py), not a migration
        self._capture_logs()
        built = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(built,),
                                       name=f"gateway:{self.port}", daemon=True)
        self.thread.start()
        built.wait()
        if wait:
            self.wait_ready()
        return self

    def ended(self) -> str | None:
        assert self.thread is not None
        if self.thread.is_alive():
            return None
        self._ended()
        return f"gateway ended: {self.failure!r}"

    def ready(self) -> bool:
        return self.server is not None and self.server.started and self.answers()

    def output(self) -> str:
        if self._handler is not None:
            self._handler.flush()
        return super().output()

    def stop(self) -> None:
        """As a SIGTERM: no more admissions, open streams closed, running turns given the
        grace period, then the lifespan's shutdown closes the engine and its database."""
        self._end(cancel_turns=False)

    def kill(self) -> None:
        """Not a crash (nothing in-process can be): a stop that cancels the running turns at
        once instead of waiting for them, so the end of a test never waits a grace period."""
        self._end(cancel_turns=True)

    # ------------------------------------------------------------------ the thread

    def _serve(self, built: threading.Event) -> None:
        try:
            try:
                home = Home(self.home)
                config = load_config(home.config_file)
                self.app = create_app(home, config, build_engine(home, config, self.clock))
                # logging as the test process has it; the records are captured per gateway
                self.server = gateway_server(self.app, host="127.0.0.1", port=self.port,
                                             log_config=None)
            finally:
                built.set()
            self.server.run()  # its own event loop, in this thread; no signal handlers here
        except BaseException as error:  # noqa: BLE001 - said by wait_ready / _end
            self.failure = error
            logging.getLogger("hearth.tests").exception("the in-process gateway failed")

    def _end(self, cancel_turns: bool) -> None:
        thread, server = self.thread, self.server
        if thread is None:
            return
        if thread.is_alive() and server is not None:
            loop = self._loop()
            if loop is None:
                server.should_exit = True  # not serving yet: its main loop sees this first
            else:
                if cancel_turns:
                    self._cancel_turns(loop)
                try:  # SIGTERM's handler, run where a signal's would run: on the loop
                    loop.call_soon_threadsafe(server.handle_exit, signal.SIGTERM, None)
                except RuntimeError:  # the loop has just closed: the server has ended
                    pass
        thread.join(STOP_SECONDS)
        if thread.is_alive():
            if server is not None:
                server.force_exit = True
            thread.join(STOP_SECONDS)
        stuck = thread.is_alive()
        self._ended()
        if stuck:
            raise AssertionError(f"the in-process gateway did not stop:\n{self.output()}")

    def _loop(self) -> asyncio.AbstractEventLoop | None:
        server = self.server
        if server is None or not server.started or not server.servers:
            return None
        loop = server.servers[0].get_loop()
        return None if loop.is_closed() else loop

    def _cancel_turns(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.app is not None
        engine = self.app.state.engine
        if engine.lanes is None:
            return

        async def cancel() -> None:
            engine.stop_admitting()
            await engine.lanes.close(0)

        try:
            asyncio.run_coroutine_threadsafe(cancel(), loop).result(STOP_SECONDS)
        except RuntimeError:  # the loop has just closed
            pass

    def _ended(self) -> None:
        """After the thread: the log handler and the environment are given back."""
        if self._handler is not None:
            for name in LOGGERS:
                logging.getLogger(name).removeHandler(self._handler)
            self._handler.close()
            self._handler = None
            _release_info_level()
        if self._environ is not None:
            self._environ.undo()
            self._environ = None

    # ------------------------------------------------------------------ what it runs in

    def _set_environment(self) -> None:
        """The subprocess's environment (`Gateway.env()`), set on this process."""
        wanted = self.env()
        patch = pytest.MonkeyPatch()
        for name in list(os.environ):
            if name.startswith(ENV_PREFIXES) and name not in wanted:
                patch.delenv(name)
        for name, value in wanted.items():
            if os.environ.get(name) != value:
                patch.setenv(name, value)
        self._environ = patch

    def _capture_logs(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(self.log, mode="a", encoding="utf-8")
        handler.setLevel(logging.INFO)
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        for name in LOGGERS:
            logging.getLogger(name).addHandler(handler)
        _hold_info_level()
        self._handler = handler
