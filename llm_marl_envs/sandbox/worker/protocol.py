"""Wire formats: caller <-> fork server frames, child -> fork server result records, and the
compiled set-up and tests a request may carry (:func:`compile_test_set`).

Frames (control socket, trusted both ways): a 4-byte big-endian length, then that many
bytes of UTF-8 JSON. JSON, never pickle, so a compromised worker cannot run code in the
caller by what it sends back. A reply may carry raw byte strings after its frame (an I/O
test's stdout: as JSON text, bytes that are not UTF-8 would cost six times their size, and the
caller would hold several copies), announced by their sizes in the frame's ``"blobs"``; the
reader takes only sizes it was told to accept, each into one buffer of its exact size.

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

import importlib.util
import json
import marshal
import os
import re
import select
import struct
import time
import types
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

# The file names of a job's set-up and assert tests, in tracebacks. The caller compiles them
# under these names too (..testcode), so the job process can show their source lines.
SETUP_FILE = "<setup>"


def test_file_name(name: str) -> str:
    return f"<test {name}>"


def compile_test_set(setup: str, tests: list[dict[str, Any]]) -> str:
    """A request's set-up and assert tests compiled, as they travel (``"compiled"``).

    The bytecode version, the set-up's code and one code per test (None for an I/O test),
    marshalled and hex-encoded (``bytes.fromhex`` needs no module in the fork server). Raises
    whatever ``compile`` raises.
    """
    setup_code = compile(setup, SETUP_FILE, "exec", dont_inherit=True, optimize=0)
    test_codes = tuple(compile(t["code"], test_file_name(t["name"]), "exec", dont_inherit=True, optimize=0)
                       if t.get("kind", "assert") == "assert" else None for t in tests)
    return marshal.dumps((importlib.util.MAGIC_NUMBER, setup_code, test_codes)).hex()


def load_test_set(blob: Any, n_tests: int) -> tuple[types.CodeType, tuple[Any, ...]] | None:
    """The (set-up code, test codes) of :func:`compile_test_set`; None if unreadable, of another
    bytecode version, or not one code per test."""
    if not isinstance(blob, str):
        return None
    try:
        magic, setup_code, test_codes = marshal.loads(bytes.fromhex(blob))
    except Exception:  # noqa: BLE001 - unreadable: the sources are compiled instead
        return None
    if magic != importlib.util.MAGIC_NUMBER or not isinstance(setup_code, types.CodeType):
        return None
    if not isinstance(test_codes, tuple) or len(test_codes) != n_tests:
        return None
    return setup_code, test_codes


class ProtocolError(Exception):
    """The peer broke the frame protocol (the fork server or the caller, never the program)."""


def encode_frame(obj: Any) -> bytes:
    data = json.dumps(obj, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return HEADER.pack(len(data)) + data


def send_frame(sock: Any, obj: Any, blobs: Any = ()) -> None:
    """Send one frame on a connected socket (blocking), then ``blobs`` (raw byte strings) if any."""
    if blobs:
        obj = {**obj, "blobs": [len(blob) for blob in blobs]}
    sock.sendall(encode_frame(obj))
    for blob in blobs:
        sock.sendall(blob)


class FrameReader:
    """Reads the frames that arrive on a socket, one at a time.

    A peer may send its next frame before this side has read the previous one (the caller
    queues a second job while the fork server runs the first), so bytes beyond the end of a
    frame are kept for the next read. :meth:`read` raises EOFError on a closed peer,
    TimeoutError past ``deadline`` (a ``time.monotonic()`` value), ProtocolError on a
    malformed frame.
    """

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self._pending = bytearray()

    def read(self, deadline: float | None = None, max_blob: int = 0) -> Any:
        """The next frame; blobs after it (see the module docstring) replace its ``"blobs"`` sizes,
        as bytearrays; a blob above ``max_blob`` bytes is a ProtocolError, read nowhere."""
        obj = self._frame(deadline)
        sizes = obj.get("blobs") if isinstance(obj, dict) else None
        if sizes is not None:
            if type(sizes) is not list or not all(type(n) is int and 0 <= n <= max_blob for n in sizes):
                raise ProtocolError("a reply's attachments are not what the request allows")
            obj["blobs"] = [self._exactly(n, deadline) for n in sizes]
        return obj

    def _exactly(self, n: int, deadline: float | None) -> bytearray:
        buf = bytearray(n)
        got = min(n, len(self._pending))
        buf[:got] = self._pending[:got]
        del self._pending[:got]
        view = memoryview(buf)
        while got < n:
            _wait_readable(self.sock, deadline)
            count = self.sock.recv_into(view[got:], n - got)
            if not count:
                raise EOFError("sandbox worker closed the connection")
            got += count
        return buf

    def _frame(self, deadline: float | None) -> Any:
        pending = self._pending
        if not pending:  # the common case: one recv brings exactly one frame
            chunk = _recv_some(self.sock, 1 << 16, deadline)
            if len(chunk) >= HEADER.size and len(chunk) == HEADER.size + HEADER.unpack_from(chunk)[0]:
                return _decode(memoryview(chunk)[HEADER.size:])
            pending += chunk
        while len(pending) < HEADER.size:
            pending += _recv_some(self.sock, 1 << 16, deadline)
        (size,) = HEADER.unpack_from(pending)
        if size > MAX_FRAME_BYTES:
            raise ProtocolError(f"frame of {size} bytes is too large")
        end = HEADER.size + size
        while len(pending) < end:
            pending += _recv_some(self.sock, min(max(end - len(pending), 1 << 16), 1 << 20), deadline)
        data = bytes(pending[HEADER.size:end])
        del pending[:end]
        return _decode(memoryview(data))


def _decode(data: memoryview) -> Any:
    try:
        return json.loads(str(data, "utf-8", "surrogatepass"))
    except ValueError as exc:
        raise ProtocolError(f"malformed frame: {exc}") from None


def _wait_readable(sock: Any, deadline: float | None) -> None:
    while deadline is not None:
        wait = deadline - time.monotonic()
        if wait <= 0:
            raise TimeoutError("no reply from the sandbox worker in time")
        if select.select([sock], [], [], wait)[0]:
            break


def _recv_some(sock: Any, limit: int, deadline: float | None) -> bytes:
    """At least one byte (at most ``limit``), waiting until ``deadline`` at most."""
    _wait_readable(sock, deadline)
    chunk = sock.recv(limit)
    if not chunk:
        raise EOFError("sandbox worker closed the connection")
    return chunk


Record = tuple  # (kind: str, index: int, flag: bool, time: float, payload: dict)


# The payload of most other records (a passing test, the program's run), as the harness
# writes it: read without the JSON decoder (same values; anything else goes through it).
_TIMING = re.compile(r'\{"wall_time_s": ([-+.0-9eE]+), "cpu_time_s": ([-+.0-9eE]+)\}')


def parse_record(line: bytes, nonce: str) -> Record | None:
    """Decode one record line; None if it is not a well-formed record with ``nonce``."""
    try:
        text = line.decode("utf-8")
        got_nonce, kind, index, flag, stamp, payload = text.split(" ", 5)
        if got_nonce != nonce or flag not in ("0", "1"):
            return None
        when = float(stamp)
        if not -1e12 < when < 1e12:  # (NaN too) a time that would void the deadlines
            return None
        if payload == "{}":  # most records (BEGIN, END, ...) carry nothing: skip the decoder
            return kind, int(index), flag == "1", when, {}
        timing = _TIMING.fullmatch(payload)
        if timing is not None:
            data = {"wall_time_s": float(timing[1]), "cpu_time_s": float(timing[2])}
        else:
            data = json.loads(payload)
            if not isinstance(data, dict):
                return None
        return kind, int(index), flag == "1", when, data
    except (ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return None


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until everything is written (pipes may accept partial writes)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
