"""The server side of a WebSocket (RFC 6455) over a blocking socket, standard library only (and a
minimal client side, :class:`WebSocketClient`, for tests and the soak benchmark).

Enough for the OpenEnv session endpoint (``/ws``): the opening handshake's accept key, text
messages in and out (fragmented messages reassembled, their size bounded), ping answered with
pong, and the closing handshake. No extensions (a client's ``permessage-deflate`` offer is simply
not accepted) and no subprotocols. Client frames must be masked, as the RFC requires.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import struct
from typing import BinaryIO

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CLOSE, PING, PONG, CONTINUATION = 0x1, 0x2, 0x8, 0x9, 0xA, 0x0

#: close codes used here
NORMAL, GOING_AWAY, PROTOCOL_ERROR, UNSUPPORTED, INVALID_DATA, POLICY, TOO_BIG = 1000, 1001, 1002, 1003, 1007, 1008, 1009


class WebSocketClosed(Exception):
    """The peer closed the connection (or broke the protocol); ``code`` and ``reason`` say how."""

    def __init__(self, code: int = NORMAL, reason: str = "") -> None:
        super().__init__(f"{code} {reason}".strip())
        self.code, self.reason = code, reason


def accept_key(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` value answering a client's ``Sec-WebSocket-Key``."""
    return base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()


def valid_key(key: str | None) -> bool:
    """A ``Sec-WebSocket-Key`` is 16 random bytes, base64-encoded."""
    try:
        return key is not None and len(base64.b64decode(key, validate=True)) == 16
    except ValueError:
        return False


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    data = stream.read(n)
    if data is None or len(data) < n:
        raise WebSocketClosed(GOING_AWAY, "connection closed mid-frame")
    return data


def send_frame(stream: BinaryIO, opcode: int, payload: bytes = b"") -> None:
    """Write one unmasked (server) frame."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    stream.write(head + payload)
    stream.flush()


def send_text(stream: BinaryIO, text: str) -> None:
    send_frame(stream, TEXT, text.encode("utf-8"))


def send_close(stream: BinaryIO, code: int = NORMAL, reason: str = "") -> None:
    """Start (or answer) the closing handshake; errors writing to a gone peer are ignored."""
    try:
        send_frame(stream, CLOSE, struct.pack("!H", code) + reason.encode("utf-8")[:120])
    except OSError:
        pass


def _read_frame(stream: BinaryIO, max_bytes: int) -> tuple[bool, int, bytes]:
    """One frame. A timeout before its first byte propagates as ``TimeoutError`` (the peer is idle, nothing
    was consumed); a timeout inside it closes the connection (the stream would be out of step)."""
    first = _read_exact(stream, 1)[0]
    try:
        second = _read_exact(stream, 1)[0]
        fin, opcode, masked, length = bool(first & 0x80), first & 0x0F, bool(second & 0x80), second & 0x7F
        if first & 0x70:
            raise WebSocketClosed(PROTOCOL_ERROR, "reserved bits set (no extension was negotiated)")
        if not masked:
            raise WebSocketClosed(PROTOCOL_ERROR, "client frames must be masked")
        if length == 126:
            (length,) = struct.unpack("!H", _read_exact(stream, 2))
        elif length == 127:
            (length,) = struct.unpack("!Q", _read_exact(stream, 8))
        if opcode >= CLOSE and (length > 125 or not fin):
            raise WebSocketClosed(PROTOCOL_ERROR, "control frames are short and unfragmented")
        if length > max_bytes:
            raise WebSocketClosed(TOO_BIG, f"a message over the {max_bytes}-byte limit ({length} bytes in one frame)")
        mask = _read_exact(stream, 4)
        data = _read_exact(stream, length)
    except TimeoutError:
        raise WebSocketClosed(POLICY, "a frame did not arrive whole within the read timeout") from None
    keys = (mask * (length // 4 + 1))[:length]
    return fin, opcode, (int.from_bytes(data, "big") ^ int.from_bytes(keys, "big")).to_bytes(length, "big")


class MessageReader:
    """Reads a client's text messages from ``stream``, ``max_bytes`` at most each (fragments reassembled);
    answers pings and closes on ``out``."""

    def __init__(self, stream: BinaryIO, out: BinaryIO, max_bytes: int) -> None:
        self.stream, self.out, self.max_bytes = stream, out, max_bytes
        self._parts: list[bytes] = []
        self._size = 0

    def next(self) -> str | None:
        """The next whole text message, or None after a control frame or a fragment (ping answered with pong).

        Raises :class:`WebSocketClosed` when the peer closes (the close answered) or breaks the protocol, sends
        binary or a message over ``max_bytes`` (closed with the reason); ``TimeoutError`` when the peer is idle."""
        try:
            fin, opcode, data = _read_frame(self.stream, self.max_bytes - self._size)
        except WebSocketClosed as exc:
            send_close(self.out, exc.code if exc.code != GOING_AWAY else NORMAL, exc.reason)
            raise
        if opcode == PING:
            send_frame(self.out, PONG, data)
            return None
        if opcode == PONG:
            return None
        if opcode == CLOSE:
            code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else NORMAL
            send_close(self.out, code)
            raise WebSocketClosed(code, data[2:].decode("utf-8", "replace"))
        if opcode == BINARY or (opcode == CONTINUATION) != bool(self._parts):
            code, reason = ((UNSUPPORTED, "binary messages are not accepted") if opcode == BINARY
                            else (PROTOCOL_ERROR, "unexpected continuation frame"))
            send_close(self.out, code, reason)
            raise WebSocketClosed(code, reason)
        self._parts.append(data)
        self._size += len(data)
        if not fin:
            return None
        message, self._parts, self._size = b"".join(self._parts), [], 0
        try:
            return message.decode("utf-8")
        except UnicodeDecodeError:
            send_close(self.out, INVALID_DATA, "a text message is not UTF-8")
            raise WebSocketClosed(INVALID_DATA, "a text message is not UTF-8") from None


class WebSocketClient:
    """A minimal client side over one socket (text messages, masked frames): for tests and the soak
    benchmark, which speak to :class:`~llm_marl_envs.bridges.openenv_server.SeatServer` without ``openenv``."""

    def __init__(self, host: str, port: int, path: str = "/ws", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.stream = self.sock.makefile("rb")
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            line = self.stream.readline(65536)
            if not line:
                raise WebSocketClosed(GOING_AWAY, f"handshake refused: {head.decode('latin-1')[:200]!r}")
            head += line
        if b" 101 " not in head.split(b"\r\n", 1)[0] or accept_key(key).encode() not in head:
            raise WebSocketClosed(PROTOCOL_ERROR, f"handshake refused: {head.decode('latin-1')[:200]!r}")

    def send(self, text: str | bytes, opcode: int = TEXT) -> None:
        payload = text.encode("utf-8") if isinstance(text, str) else text
        mask, n = os.urandom(4), len(payload)
        head = (struct.pack("!BB", 0x80 | opcode, 0x80 | n) if n < 126 else
                struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n) if n < 1 << 16 else
                struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n))
        keys = (mask * (n // 4 + 1))[:n]
        body = (int.from_bytes(payload, "big") ^ int.from_bytes(keys, "big")).to_bytes(n, "big") if n else b""
        self.sock.sendall(head + mask + body)

    def ping(self, payload: bytes = b"ping") -> bytes:
        """Send a ping; the payload of the pong that answers it."""
        self.send(payload, PING)
        return self.receive(PONG).encode("latin-1")

    def receive(self, want: int = TEXT) -> str:
        """The next text message (or frame of opcode ``want``) from the server; :class:`WebSocketClosed` when it
        closes."""
        while True:
            first, second = _read_exact(self.stream, 2)
            length = second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", _read_exact(self.stream, 2))
            elif length == 127:
                (length,) = struct.unpack("!Q", _read_exact(self.stream, 8))
            data, opcode = _read_exact(self.stream, length), first & 0x0F
            if opcode == CLOSE:
                code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else NORMAL
                raise WebSocketClosed(code, data[2:].decode("utf-8", "replace"))
            if opcode == want:
                return data.decode("utf-8" if want == TEXT else "latin-1")

    def close(self) -> None:
        try:
            self.send(struct.pack("!H", NORMAL), CLOSE)
        except OSError:
            pass
        self.abandon()

    def abandon(self) -> None:
        """Drop the connection without the closing handshake (a client that vanished)."""
        self.stream.close()
        self.sock.close()
