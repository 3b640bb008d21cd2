"""One fork-server process as seen from the caller: start it, talk to it, kill it.

The fork server is a fresh interpreter (``python -I -S -B``: no user site, no ``PYTHON*``
variables, no bytecode writes, no :mod:`site`, see :mod:`.worker.sitepath`) started with a
minimal environment, in its own session, with one end of a socket pair. It loads
:mod:`llm_marl_envs.sandbox.worker` straight from its files, as a top-level package named
``llm_sandbox_worker``, without importing ``llm_marl_envs`` (whose ``__init__`` may import
heavy libraries), so its warm heap holds nothing but the standard library and the preloaded
modules.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

from .config import SandboxConfig
from .results import SandboxError
from .worker import protocol as P

WORKER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker")

# The worker package is loaded under a top-level name of its own: under its real name, every
# relative import in it would make the import system load the parent package llm_marl_envs
# (and whatever its __init__ imports) into the fork server.
WORKER_PACKAGE = "llm_sandbox_worker"
_BOOTSTRAP = f"""\
import importlib, importlib.util, sys
d = sys.argv[1]
spec = importlib.util.spec_from_file_location(
    "{WORKER_PACKAGE}", d + "/__init__.py", submodule_search_locations=[d])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
importlib.import_module("{WORKER_PACKAGE}.sitepath").set_up_import_path()  # before anything else
importlib.import_module("{WORKER_PACKAGE}.server").main(sys.argv[2:])
"""


def _worker_environment() -> dict[str, str]:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    if "LD_LIBRARY_PATH" in os.environ:  # some Python builds cannot start without it
        env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
    return env


def blob_limit(job: dict[str, Any] | None) -> int:
    """The most bytes a reply to ``job`` may attach (an I/O test's stdout is kept up to its cap):
    what the caller accepts to allocate for it, known before anything is read."""
    tests = (job or {}).get("tests") or ()
    return max((int(t.get("output_cap") or 0) for t in tests if t.get("kind") == "io"), default=0)


class WorkerProcess:
    """A started fork server. Not thread-safe: the pool hands it to one thread at a time."""

    def __init__(self, config: SandboxConfig, index: int) -> None:
        self.index = index
        self.ready_info: dict[str, Any] | None = None
        self._log = tempfile.TemporaryFile()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            cmd = [
                config.python or sys.executable, "-I", "-S", "-B", "-c", _BOOTSTRAP,
                WORKER_DIR, str(child.fileno()),  # (its settings: the first frame, below; not in /proc/PID/cmdline)
            ]
            self.proc = subprocess.Popen(
                cmd, pass_fds=(child.fileno(),), env=_worker_environment(), cwd="/",
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
                start_new_session=True, close_fds=True,
            )
        except BaseException:
            parent.close()
            self._log.close()
            raise
        finally:
            child.close()
        self.sock = parent
        parent.sendall(P.encode_frame(config.worker_settings(index)))  # (the socket buffers it: no wait)
        self._frames = P.FrameReader(parent)
        self._start_deadline = time.monotonic() + config.start_timeout_s

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self) -> dict[str, Any]:
        """Block until the fork server reports ready; raises SandboxError if it cannot work."""
        if self.ready_info is not None:
            return self.ready_info
        try:
            frame = self._frames.read(self._start_deadline)
        except (EOFError, OSError, TimeoutError, P.ProtocolError) as exc:
            raise SandboxError(f"sandbox worker {self.index} did not start: {exc}{self.log_tail()}") from None
        if not isinstance(frame, dict) or frame.get("op") != "ready":
            raise SandboxError(f"sandbox worker {self.index} sent an unexpected first message")
        if frame.get("fatal"):
            raise SandboxError(f"sandbox worker {self.index} cannot run jobs: {frame['fatal']}")
        self.ready_info = frame
        return frame

    def call(self, request: dict[str, Any], deadline: float) -> dict[str, Any]:
        """Send one request and wait for its reply (raises EOFError/OSError/TimeoutError)."""
        self.send(P.encode_frame(request))
        return self.receive(request.get("id"), deadline, blob_limit(request.get("job")))

    def send(self, frame: bytes) -> None:
        """Send an encoded request; the fork server handles requests in order, one at a time."""
        self.wait_ready()
        self.sock.sendall(frame)

    def receive(self, request_id: Any, deadline: float, max_blob: int = 0) -> dict[str, Any]:
        """The reply to the oldest request not answered yet, which must be ``request_id``; its
        attachments (an I/O test's stdout) at most ``max_blob`` bytes each (:func:`blob_limit`)."""
        reply = self._frames.read(deadline, max_blob)
        if not isinstance(reply, dict) or reply.get("id") != request_id:
            raise P.ProtocolError("reply does not match the request")
        return reply

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, limit: int = 2000) -> str:
        try:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - limit))
            text = self._log.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        return f"\nworker log:\n{text}" if text else ""

    def kill(self) -> None:
        """Kill the fork server; the kernel then kills every job process of this worker."""
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for closable in (self.sock, self._log):
            try:
                closable.close()
            except OSError:
                pass
        isolation = (self.ready_info or {}).get("isolation") or {}
        if not isolation.get("private_tmp") and isolation.get("job_dir"):
            # Without a private /tmp the job directory is on the host: remove it if the
            # worker died in the middle of a job.
            shutil.rmtree(isolation["job_dir"], ignore_errors=True)
