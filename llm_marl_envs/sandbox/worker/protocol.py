"""Wire formats: caller <-> fork server frames, and child -> fork server result records.

Frames (control socket, trusted both ways): a 4-byte big-endian length, then that many
bytes of UTF-8 JSON. JSON, never pickle, so a compromised worker cannot run code in the
caller by what it sends back.

Records (child -> fork server, over a dedicated pipe; the child runs untrusted code, so
the reader treats every byte as hostile). One record per line::

    <nonce> <kind> <index> <flag> <time> <json payload>\\n

``nonce`` is a per-run random token the program is never told; lines with another nonce,
or that do not parse, are ignored. ``flag`` is ``1``/``0`` and is written by the harness
with plain string formatting (not by ``json``, which the program could patch). ``time`` is
the child's ``time.monotonic()`` when the record was made: the same clock as the fork
server's, which times each phase with it without having to read every record at once.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 1 << 30

# record kinds
REC_READY = "ready"  # the job process is confined; anything after this is the program's doing
REC_BAD_TEST = "badtest"  # a test (or the setup) does not compile: index -1 = setup
REC_COMPILE = "compile"  # the program does not compile: payload = error details
REC_PROGRAM = "program"  # the program's top-level run finished (flag 1) or raised (flag 0)
REC_SETUP = "setup"  # the setup code ran (flag 1) or raised (flag 0)
REC_BEGIN = "begin"  # test <index> starts
REC_RESULT = "result"  # test <index> finished: flag 1 = passed
REC_END = "end"  # the run is complete


class ProtocolError(Exception):
    """The peer broke the frame protocol (the fork server or the caller, never the program)."""


def encode_frame(obj: Any) -> bytes:
    data = json.dumps(obj, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return HEADER.pack(len(data)) + data


def send_frame(sock: Any, obj: Any) -> None:
    """Send one frame on a connected socket (blocking)."""
    sock.sendall(encode_frame(obj))


def recv_frame(sock: Any, deadline: float | None = None) -> Any:
    """Receive one frame. Raises EOFError on a closed peer, TimeoutError past ``deadline``
    (a ``time.monotonic()`` value), ProtocolError on a malformed frame."""
    header = _recv_exact(sock, HEADER.size, deadline)
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {size} bytes is too large")
    data = _recv_exact(sock, size, deadline)
    try:
        return json.loads(data.decode("utf-8", "surrogatepass"))
    except ValueError as exc:
        raise ProtocolError(f"malformed frame: {exc}") from None


def _recv_exact(sock: Any, size: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise TimeoutError("no reply from the sandbox worker in time")
            ready, _, _ = select.select([sock], [], [], wait)
            if not ready:
                continue
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise EOFError("sandbox worker closed the connection")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


Record = tuple  # (kind: str, index: int, flag: bool, time: float, payload: dict)


def parse_record(line: bytes, nonce: str) -> Record | None:
    """Decode one record line; None if it is not a well-formed record with ``nonce``."""
    try:
        text = line.decode("utf-8")
        got_nonce, kind, index, flag, stamp, payload = text.split(" ", 5)
        if got_nonce != nonce or flag not in ("0", "1"):
            return None
        when = float(stamp)
        if payload == "{}":  # most records (BEGIN, END, ...) carry nothing: skip the decoder
            return kind, int(index), flag == "1", when, {}
        data = json.loads(payload)
        if not isinstance(data, dict):
            return None
        return kind, int(index), flag == "1", when, data
    except (ValueError, UnicodeDecodeError):
        return None


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until everything is written (pipes may accept partial writes)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
