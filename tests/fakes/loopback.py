"""What the fake servers share: serving a stdlib HTTP server on 127.0.0.1 in a daemon thread
(`Loopback`: start it on a free port, stop it, start it again on the same port, use it as a
context manager, read its URL). Each fake says what it speaks; this says only where."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Self


class Loopback:
    """A server on 127.0.0.1: `port=0` picks a free port at the first start, and a start after
    a stop binds the same one again (a provider that goes away and comes back)."""

    def __init__(self, port: int = 0) -> None:
        self._port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _serve(self, httpd: ThreadingHTTPServer) -> None:
        """Serve `httpd` (bound to `self._port`) in a daemon thread of its own."""
        self._port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"{type(self).__name__}:{self._port}", daemon=True)
        self._thread.start()

    def _unserve(self) -> None:
        """Close the port and wait (5 s at most) for the serving thread to end."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"
