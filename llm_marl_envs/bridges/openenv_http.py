"""HTTP and WebSocket transport of :class:`~llm_marl_envs.bridges.openenv_server.SeatServer`.

Every bad request gets a 4xx with a JSON body ``{"error": <what is wrong>, "code": ...}``: a body
that is not JSON or not a JSON object, a non-numeric or oversized ``Content-Length``, a chunked
body, a body that does not arrive within ``read_timeout_s`` (408), an unknown route or method, an
unknown or expired session. Request and header lines are bounded by the standard library
(64 KiB a line, 100 headers: 414 / 431). Connections beyond ``max_connections`` get a 503 and are
closed; a failure inside the server is a 500 (an infrastructure error, never a task's penalty).
"""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from llm_marl_envs.bridges import BridgeError
from llm_marl_envs.bridges.websocket import (
    GOING_AWAY,
    NORMAL,
    MessageReader,
    WebSocketClosed,
    accept_key,
    send_close,
    send_text,
    valid_key,
)


class SeatServer(Protocol):
    """What the transport asks of the seat server (:class:`~llm_marl_envs.bridges.openenv_server.SeatServer`;
    a protocol here, so the transport does not import the server that imports it)."""

    limits: ServerLimits
    schemas: Any

    def open_session(self, episode_id: str | None = None, on_expire: Callable[[], None] | None = None) -> str: ...
    def drop_session(self, key: str) -> None: ...
    def reset(self, key: str | None, data: Mapping[str, Any]) -> dict: ...
    def step(self, key: str, action: Any) -> dict: ...
    def state(self, key: str) -> dict: ...
    def metadata(self) -> dict: ...

class RequestError(BridgeError):
    """A request the server refuses: ``status`` is its HTTP status, ``code`` OpenEnv's WebSocket error code."""

    def __init__(self, status: int, message: str, code: str = "VALIDATION_ERROR") -> None:
        super().__init__(message)
        self.status, self.code = status, code


@dataclass
class ServerLimits:
    """Bounds on what one client can hold (docs/bridges.md#limits-and-bad-input).

    max_body_bytes: largest request body or WebSocket message (413 / close 1009 beyond).
    read_timeout_s: an HTTP request's body (or its next line) must arrive within this (408 after).
    session_ttl_s: a session (an episode) unused this long is dropped; a WebSocket without a message this
        long is closed (the server's reaper checks every ``min(session_ttl_s / 2, 5)`` seconds).
    max_sessions: open sessions at once (503 ``CAPACITY_REACHED`` beyond, after dropping expired ones).
    max_connections: connections served at once (503 and closed beyond).
    """

    max_body_bytes: int = 1 << 20
    read_timeout_s: float = 10.0
    session_ttl_s: float = 600.0
    max_sessions: int = 1024
    max_connections: int = 64

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "read_timeout_s", "session_ttl_s", "max_sessions", "max_connections"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ServerLimits.{name} must be > 0, got {getattr(self, name)!r}")


_HTTP_STEP = ('step over HTTP needs the "episode_id" that /reset returned (in its metadata): this server keeps '
              "each episode between calls; OpenEnv's own clients play over the /ws WebSocket, which needs none")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, seat: SeatServer, host: str, port: int) -> None:
        self.seat = seat
        self.slots = threading.BoundedSemaphore(seat.limits.max_connections)
        super().__init__((host, port), _handler(seat))

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):  # refuse at once rather than queue a thread per connection
            body = json.dumps({"error": f"the server serves {self.seat.limits.max_connections} connections at once "
                                        "(ServerLimits.max_connections); retry later", "code": "CAPACITY_REACHED"})
            try:
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}".encode())
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that vanished (reset, broken pipe, timeout) is not an error; anything else is logged once."""
        if not isinstance(sys.exc_info()[1], OSError):
            logging.getLogger(__name__).exception("OpenEnv server: request from %s failed", client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def make_http_server(seat: SeatServer, host: str, port: int) -> ThreadingHTTPServer:
    """The (not yet serving) HTTP server of ``seat``."""
    return _HTTPServer(seat, host, port)


def _handler(server: SeatServer) -> type[BaseHTTPRequestHandler]:
    limits = server.limits

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, and the 101 of the WebSocket upgrade
        timeout = limits.read_timeout_s  # every read of the request (line, headers, body) times out

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """The standard library's own refusals (bad request line, line too long, too many headers) as JSON."""
            self.close_connection = True
            text = message or explain or "bad request"
            if code in (414, 431):
                text += " (a request or header line is at most 64 KiB, and a request has at most 100 headers)"
            self._send(405 if code == 501 else code, {"error": text, "code": "VALIDATION_ERROR"})

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if self.close_connection:
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client left
                self.close_connection = True

        def _guard(self, fn: Callable[[], Any]) -> None:
            try:
                self._send(200, fn())
            except RequestError as exc:
                self._send(exc.status, {"error": str(exc), "code": exc.code})
            except Exception as exc:  # noqa: BLE001 - an infrastructure failure, reported as one
                self.close_connection = True
                self._send(500, {"error": f"internal error ({type(exc).__name__}): {exc}", "code": "EXECUTION_ERROR"})

        def _body(self) -> dict:
            if self.headers.get("Transfer-Encoding"):
                self.close_connection = True
                raise RequestError(411, "chunked or encoded bodies are not accepted: send a Content-Length")
            raw = self.headers.get("Content-Length")
            if raw is not None and not raw.strip().isdigit():
                self.close_connection = True
                raise RequestError(400, f"Content-Length must be a non-negative integer, got {raw!r:.40}")
            length = int(raw) if raw is not None else 0
            if length > limits.max_body_bytes:
                self.close_connection = True  # the body is not read
                raise RequestError(413, f"the body is {length} bytes, over the {limits.max_body_bytes}-byte limit "
                                        "(ServerLimits.max_body_bytes)")
            try:
                data = self.rfile.read(length)
            except TimeoutError:
                self.close_connection = True
                raise RequestError(408, f"the body did not arrive within {limits.read_timeout_s:g} s (Content-Length "
                                        f"{length}; is it larger than the body?)") from None
            if len(data) < length:
                self.close_connection = True
                raise RequestError(400, f"the connection ended after {len(data)} of {length} body bytes")
            if not data.strip():
                return {}
            try:
                body = json.loads(data)
            except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, nesting too deep
                raise RequestError(400, f"the body is not JSON: {str(exc)[:200]}") from None
            if not isinstance(body, dict):
                raise RequestError(422, f"the body must be a JSON object, got a JSON {type(body).__name__}")
            return body

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            if url.path == "/ws":
                self._websocket()
            elif url.path == "/health":
                self._send(200, {"status": "healthy"})
            elif url.path == "/schema":
                self._send(200, server.schemas)
            elif url.path == "/metadata":
                self._send(200, server.metadata())
            elif url.path == "/state":
                key = query.get("episode_id", [""])[0]
                self._guard(lambda: server.state(key) if key else _missing("state"))
            else:
                self._send(404, {"error": f"no route GET {url.path}", "code": "VALIDATION_ERROR"})

        def do_POST(self) -> None:  # noqa: N802
            path = urllib.parse.urlsplit(self.path).path
            if path not in ("/reset", "/step"):
                self.close_connection = True
                self._send(404, {"error": f"no route POST {path}", "code": "VALIDATION_ERROR"})
                return
            self._guard(lambda: self._post(path, self._body()))

        def _post(self, path: str, body: dict) -> dict:
            if path == "/reset":
                return server.reset(None, body)
            key = body.get("episode_id")
            if not key:
                raise RequestError(422, _HTTP_STEP)
            if "action" not in body:
                raise RequestError(422, 'step needs an "action" object, e.g. {"action": {"text": "..."}}')
            return server.step(str(key), body["action"])

        def _method_not_allowed(self) -> None:
            self.close_connection = True
            self._send(405, {"error": f"method {self.command} is not served (GET or POST)", "code": "VALIDATION_ERROR"})

        do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _method_not_allowed  # noqa: N815

        # ------------------------------------------------------------------ /ws
        def _websocket(self) -> None:
            key = self.headers.get("Sec-WebSocket-Key")
            if self.headers.get("Upgrade", "").lower() != "websocket" or not valid_key(key):
                self.close_connection = True
                self._send(400, {"error": "/ws is OpenEnv's WebSocket session endpoint: open it with a WebSocket "
                                          "handshake (Upgrade: websocket, a Sec-WebSocket-Key)", "code": "VALIDATION_ERROR"})
                return
            if self.headers.get("Sec-WebSocket-Version") != "13":
                self.close_connection = True
                self.send_response(426)
                self.send_header("Sec-WebSocket-Version", "13")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.close_connection = True
            self.send_response(101, "Switching Protocols")
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", accept_key(key))
            self.end_headers()
            self.wfile.flush()
            out = _LockedWriter(self.wfile)  # the reaper thread may write too (an expiry)
            try:
                session = server.open_session(on_expire=lambda: self._expired(out))
            except RequestError as exc:  # as OpenEnv's server: accept, send the error, close
                send_text(out, json.dumps({"type": "error", "data": {"message": str(exc), "code": exc.code}}))
                send_close(out, GOING_AWAY, "capacity reached")
                return
            try:
                self._play(session, out)
            finally:
                server.drop_session(session)
                self._linger()

        def _play(self, session: str, out: _LockedWriter) -> None:
            """Answer the session's messages until the client closes (or the reaper expires the session)."""
            self.connection.settimeout(None)  # waiting for a message is not a timeout: the session's TTL bounds it
            reader = MessageReader(self.rfile, out, limits.max_body_bytes)
            while True:
                try:
                    text = reader.next()
                except (WebSocketClosed, OSError):
                    return
                if text is None:  # a control frame or a fragment
                    continue
                reply = _dispatch(server, session, text)
                try:
                    if reply is None:
                        send_close(out, NORMAL)
                        return
                    send_text(out, json.dumps(reply))
                except OSError:
                    return

        def _expired(self, out: _LockedWriter) -> None:
            """Called by the reaper: tell the client its session expired, close, and unblock the reading thread."""
            message = f"session expired after {limits.session_ttl_s:g} s without a message"
            try:
                send_text(out, json.dumps({"type": "error", "data": {"message": message, "code": "SESSION_ERROR"}}))
            except OSError:
                pass
            send_close(out, GOING_AWAY, "session expired")
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def _linger(self) -> None:
            """Before closing, read (and drop) what the client still sends, a little: closing a socket with
            unread data resets the connection, and the client would lose the close frame and its reason."""
            try:
                self.connection.shutdown(socket.SHUT_WR)
                self.connection.settimeout(0.5)
                left = limits.max_body_bytes
                while left > 0 and (chunk := self.connection.recv(min(left, 65536))):
                    left -= len(chunk)
            except OSError:
                pass

    return Handler


class _LockedWriter:
    """A WebSocket's output, written by its handler and, on expiry, by the server's reaper: one frame at a time."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.lock = stream, threading.Lock()

    def write(self, data: bytes) -> None:
        with self.lock:
            self.stream.write(data)

    def flush(self) -> None:
        with self.lock:
            self.stream.flush()


def _missing(what: str) -> dict:
    raise RequestError(422, f'{what} over HTTP needs the "episode_id" that /reset returned (in its metadata)')


def _dispatch(server: SeatServer, session: str, text: str) -> dict | None:
    """Answer one OpenEnv WebSocket message (None: the client closes the session)."""
    try:
        message = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return {"type": "error", "data": {"message": f"Invalid JSON: {str(exc)[:200]}", "code": "INVALID_JSON"}}
    try:
        if not isinstance(message, dict):
            raise RequestError(422, f"a message must be a JSON object, got a JSON {type(message).__name__}")
        kind, data = message.get("type"), message.get("data", {})
        if kind == "close":
            return None
        if kind == "state":
            return {"type": "state", "data": server.state(session)}
        if kind not in ("reset", "step"):
            return {"type": "error", "data": {"message": f"Unknown message type: {kind!r:.40} (reset, step, state, "
                                                         "close)", "code": "UNKNOWN_TYPE"}}
        if not isinstance(data, dict):
            raise RequestError(422, f"{kind}: data must be a JSON object, got {data!r:.80}")
        out = server.reset(session, data) if kind == "reset" else server.step(session, data)
        return {"type": "observation", "data": out}
    except RequestError as exc:
        return {"type": "error", "data": {"message": str(exc), "code": exc.code}}
    except Exception as exc:  # noqa: BLE001 - an infrastructure failure, reported as one
        return {"type": "error", "data": {"message": f"internal error ({type(exc).__name__}): {exc}",
                                          "code": "EXECUTION_ERROR"}}
