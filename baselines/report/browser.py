"""Drive a headless Chromium over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

No driver binary and no Python package: Chromium reads commands from fd 3 and writes replies and
events to fd 4, as NUL-terminated JSON. Enough to open a report, click, read the page, collect
console errors and take screenshots (the report's browser test and its opening benchmark).
"""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary on PATH (``$CHROMIUM`` first), or None."""
    env = os.environ.get("CHROMIUM")
    if env and shutil.which(env):
        return shutil.which(env)
    return next((shutil.which(c) for c in CANDIDATES if shutil.which(c)), None)


class Browser:
    """One headless Chromium with one page. Use as a context manager."""

    def __init__(self, binary: str | None = None, width: int = 1280, height: int = 900, timeout: float = 30.0) -> None:
        binary = binary or find_chromium()
        if binary is None:
            raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="report-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:  # in the child: the pipe ends chromium expects on fds 3 and 4
            r, w = os.dup(to_chrome_r), os.dup(from_chrome_w)  # above 4, so neither dup2 clobbers the other
            os.dup2(r, 3)
            os.dup2(w, 4)

        args = [binary, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--mute-audio", f"--user-data-dir={self._profile}", "about:blank"]
        self.proc = subprocess.Popen(args, preexec_fn=fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     close_fds=False)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._inbox: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next = 0
        self.events: list[dict] = []
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable", session=True)
            self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                             "deviceScaleFactor": 1, "mobile": False}, session=True)
        except (RuntimeError, TimeoutError, OSError) as exc:  # e.g. a chromium that cannot start here
            self.close()
            raise RuntimeError(f"{binary} did not start a DevTools session: {exc}") from exc

    def _read(self) -> None:
        buf = b""
        with os.fdopen(self._from_chrome, "rb", buffering=0) as fh:
            while chunk := fh.read(65536):
                buf += chunk
                *msgs, buf = buf.split(b"\0")
                for m in msgs:
                    self._inbox.put(json.loads(m))
        self._inbox.put(None)

    def call(self, method: str, params: dict | None = None, *, session: bool = False) -> dict:
        """Send one command and wait for its result (events seen meanwhile go to :attr:`events`)."""
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._get(deadline, method)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _get(self, deadline: float, what: str) -> dict:
        try:
            reply = self._inbox.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(f"chromium did not answer {what} in {self.timeout} s") from None
        if reply is None:
            raise RuntimeError(f"chromium exited (code {self.proc.poll()}) during {what}")
        return reply

    def wait_event(self, method: str) -> dict:
        """Wait for the next event ``method`` (one already received counts)."""
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + self.timeout
        while True:
            e = self._get(deadline, method)
            if e.get("method") == method:
                return e
            self.events.append(e)

    def open(self, path: str | Path) -> float:
        """Load a local file; returns the seconds until its load event (the report's script has run)."""
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
        start = time.perf_counter()
        self.call("Page.navigate", {"url": Path(path).resolve().as_uri()}, session=True)
        self.wait_event("Page.loadEventFired")
        return time.perf_counter() - start

    def js(self, expression: str) -> Any:
        """Evaluate ``expression`` in the page and return its (JSON) value; a thrown error raises."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                      session=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page error: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    def wait_for(self, expression: str) -> Any:
        """Poll ``expression`` in the page until it is truthy; returns its value (times out like :meth:`call`)."""
        return self.js(f"new Promise(r => {{ const f = () => {{ const v = ({expression}); v ? r(v) : setTimeout(f, 5); }}; "
                       "f(); })")

    def screenshot(self, path: str | Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(str(p.get("exceptionDetails", {}).get("exception", {}).get("description")
                               or p.get("exceptionDetails", {}).get("text")))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(str(p["entry"].get("text")))
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call("Browser.close")
            except (RuntimeError, TimeoutError, OSError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
