"""The /metrics HTTP server with bounds: prometheus_client's own server starts a thread per
connection and waits on each client forever (500 slow connections: 506 threads). Here at most
MAX_CLIENTS requests are served at once (a connection over the cap is closed at once, with no
thread), each client has REQUEST_TIMEOUT_S to send its request and take the answer, and a
client that misbehaves is dropped without a traceback on the terminal. The WSGI app is still
prometheus_client's (``make_wsgi_app``): the exposition format is theirs."""

from __future__ import annotations

import socket
import threading
from socketserver import ThreadingMixIn
from typing import Any, cast
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.registry import CollectorRegistry

MAX_CLIENTS = 16
"""Requests served at once: a Prometheus server scrapes one at a time; a few humans with curl
fit too."""
REQUEST_TIMEOUT_S = 5.0
"""Seconds a client has for each read and write on its connection (a scrape takes ms)."""


class _Handler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_S  # StreamRequestHandler sets it on the socket

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing on the terminal: the TUI owns it."""


class BoundedServer(ThreadingMixIn, WSGIServer):
    """A thread per request up to ``max_clients``; connections past it are closed unserved."""

    daemon_threads = True
    max_clients = MAX_CLIENTS
    request_queue_size = 128  # socketserver's 5 drops bursts of connects (clients retry in 1 s)

    def server_activate(self) -> None:
        self._slots = threading.BoundedSemaphore(self.max_clients)
        super().server_activate()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # over the cap: no thread, no wait
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that times out or hangs up is dropped quietly (socketserver would print a
        traceback over the screen)."""


def start_server(
    port: int, host: str, registry: CollectorRegistry, max_clients: int = MAX_CLIENTS
) -> tuple[BoundedServer, threading.Thread]:
    """Listen on (host, port) and serve ``registry`` from a daemon thread. OSError (one the
    caller turns into a line) when the address cannot be had."""
    family, _, _, _, sockaddr = next(
        iter(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE))
    )
    server_class = type(
        "BoundedServer", (BoundedServer,), {"address_family": family, "max_clients": max_clients}
    )
    app = make_wsgi_app(registry)
    httpd = cast(BoundedServer, make_server(str(sockaddr[0]), port, app, server_class, _Handler))
    thread = threading.Thread(target=httpd.serve_forever, name="gputop-metrics", daemon=True)
    thread.start()
    return httpd, thread
