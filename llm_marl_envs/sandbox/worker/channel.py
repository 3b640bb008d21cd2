"""Length-prefixed messages between a job's judge and its program process (a socket pair).

Both sides use raw descriptors. The judge treats everything it reads as hostile: a message
above ``limit`` bytes, or a peer that hangs up, raises :class:`ChannelClosed`.
"""

from __future__ import annotations

import os

MAX_MESSAGE_BYTES = 64 << 20


class ChannelClosed(Exception):
    """The peer hung up, or broke the framing."""


class ChannelAbuse(ChannelClosed):
    """The peer sent something that is not a message of the protocol (a flood, junk)."""


class Channel:
    """One end of the socket pair. Keeps what a read brought beyond the message asked for (the
    peer's next message, for the judge; a message is usually read whole in one read); a subclass
    that makes the descriptor non-blocking waits in :meth:`_wait`."""

    def __init__(self, fd: int, limit: int = MAX_MESSAGE_BYTES) -> None:
        self.fd = fd
        self.limit = limit
        self._read, self._write = os.read, os.write  # bound now: the program may patch os later
        self.buffer = b""  # bytes read past the last message

    def send(self, data: bytes) -> None:
        view = memoryview(len(data).to_bytes(4, "big") + data)
        write, fd = self._write, self.fd
        while view:
            try:
                view = view[write(fd, view):]
            except BlockingIOError:
                self._wait(writing=True)
            except InterruptedError:
                continue
            except OSError as exc:
                raise ChannelClosed(str(exc)) from None

    def recv(self) -> bytes:
        size = int.from_bytes(self._exactly(4), "big")
        if size > self.limit:
            raise ChannelAbuse(f"a message of {size} bytes (limit {self.limit})")
        return self._exactly(size)

    def _wait(self, writing: bool) -> None:
        """Until the descriptor is ready; only a non-blocking one can get here."""
        raise ChannelClosed("the channel's descriptor was made non-blocking")

    def _exactly(self, n: int) -> bytes:
        buffer = self.buffer
        if len(buffer) >= n:
            self.buffer = buffer[n:]
            return buffer[:n]
        read, fd = self._read, self.fd
        parts, got = [buffer], len(buffer)
        self.buffer = b""
        while got < n:
            try:
                chunk = read(fd, min(max(n - got, 1 << 16), 1 << 20))
            except BlockingIOError:
                self._wait(writing=False)
                continue
            except InterruptedError:
                continue
            except OSError as exc:
                raise ChannelClosed(str(exc)) from None
            if not chunk:
                raise ChannelClosed("the peer hung up")
            parts.append(chunk)
            got += len(chunk)
        data = b"".join(parts)
        self.buffer = data[n:]
        return data[:n]
