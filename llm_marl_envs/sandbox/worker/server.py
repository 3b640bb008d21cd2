"""The fork server ("zygote"): one per pool slot, serving job requests from the caller.

Started by the caller as ``python -I -S -B -c <bootstrap> <worker dir> <socket fd>`` (the
bootstrap first sets up the import path: :mod:`.sitepath`) with a scrubbed environment; its
settings come as the first frame on the socket, never on the command line (``/proc/1/cmdline``
is readable by every job). It enters its namespaces (:mod:`.namespaces`), becomes PID 1
of its PID namespace when it has one, sets up its file-system view (:mod:`.fsview`),
pre-imports the configured modules (so jobs do not pay for them), checks that a confined
job process can actually work (the self-test), reports what isolation is in effect, and
then runs one job at a time: for each, it forks fresh job processes from this warm
interpreter (:mod:`.jobs`, :mod:`.supervisor`).
"""

from __future__ import annotations

import _socket
import gc
import importlib
import os
import signal
import sys
import traceback
import types
from typing import Any

from . import linux, warmup
from . import protocol as P
from .child import RESULT_FD, ChildSpec, confine
from .fsview import FsView, python_paths, remove_path, setup_fs_view
from .guard import REAL, install_guard
from .harness import PROGRAM_FILE
from .jobs import JobRunner
from .namespaces import enter_namespaces
from .roles import child_main
from .seccomp import build_filter
from .supervisor import Supervisor
from .zygote import Zygote


def main(argv: list[str]) -> None:
    sock_fd = int(argv[0])
    settings = P.FrameReader(_socket.socket(fileno=os.dup(sock_fd))).read()  # (nothing follows before "ready")
    # Jobs inherit sys.argv and __main__: they see neither how this process was started (its
    # settings) nor the variables of the bootstrap code that started it.
    sys.argv = [PROGRAM_FILE]
    sys.modules["__main__"] = types.ModuleType("__main__")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if settings.get("cpu") is not None:
        # This process and every job it forks run on one CPU: a job then starts on the CPU
        # its fork server runs on, whose caches hold the pages it shares with it, and the
        # fork server is woken there when the job ends (about 3 % more jobs per second).
        try:
            os.sched_setaffinity(0, {int(settings["cpu"])})
        except OSError:  # e.g. no longer an allowed CPU: run unpinned
            pass
    sys.dont_write_bytecode = True
    report = enter_namespaces(bool(settings["use_namespaces"]))
    if report["pid_ns"]:
        server_pid = os.fork()
        if server_pid:
            os.close(sock_fd)  # only the server may hold the caller's socket (EOF = server gone)
            _wait_and_exit(server_pid)
        linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    else:
        linux.prctl(linux.PR_SET_CHILD_SUBREAPER, 1)
    linux.set_process_name(b"sbx-server")
    linux.prctl(linux.PR_SET_DUMPABLE, 0)  # no ptrace, no /proc/<pid>/mem for jobs
    linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)  # inherited by every job: no set-uid binaries
    linux.limit_malloc_arenas(2)  # glibc reserves 64 MB of address space per thread arena
    sock = _socket.socket(fileno=sock_fd)  # not socket.py: see guard.py
    try:
        server = ForkServer(settings, report)
    except BaseException:  # noqa: BLE001 - report any start-up failure to the caller
        P.send_frame(sock, {"op": "ready", "fatal": "fork server start-up failed:\n" + traceback.format_exc()})
        os._exit(1)
    P.send_frame(sock, {"op": "ready", "pid": os.getpid(), "isolation": server.isolation, "fatal": server.fatal})
    server.serve(sock)
    os._exit(0)


def _wait_and_exit(pid: int) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            os._exit(1)
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


class ForkServer:
    def __init__(self, settings: dict[str, Any], report: dict[str, Any]) -> None:
        self.settings = settings
        root = os.geteuid() == 0
        drop = bool(settings["drop_privileges"]) and root
        self.run_uid = int(settings["uid"]) if drop else None
        self.run_gid = int(settings["gid"]) if drop else None
        needed = python_paths()
        self.view = FsView()
        if report["mount_ns"]:
            self.view = setup_fs_view(
                private_dirs=list(settings["private_dirs"]),
                hidden_paths=list(settings["hidden_paths"]),
                readable_paths=settings.get("readable_paths"),
                needed_paths=needed,
                run_uid=os.getuid() if self.run_uid is None else self.run_uid,
                run_gid=os.getgid() if self.run_gid is None else self.run_gid,
                tmpfs_size_mb=int(settings["tmpfs_size_mb"]),
                mount_proc=bool(report["pid_ns"]),
            )
        if self.view.job_root:
            self.job_dir = os.path.join(self.view.job_root, "job")
        else:  # a shared directory: a name of our own, that only exists while a job runs
            self.job_dir = os.path.join(settings["tmp_root"], "llm-sandbox-job-" + os.urandom(8).hex())
        # Every job gets exactly this environment: set it here once, not in each job process.
        os.environ.clear()
        os.environ.update(settings["env"])
        os.environ.update(HOME=self.job_dir, TMPDIR=self.job_dir, PWD=self.job_dir)
        os.umask(0o022)  # likewise the umask (and the job directory's mkdir(0o700) is then exact)
        for name in settings.get("preload", ()):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a missing optional module is not an error
                pass
        # Modules the harness needs in every job process, loaded once here. Never `threading`
        # or `random` (nor what imports them: subprocess, tempfile, secrets, statistics): they
        # register at-fork hooks that would run Python code in every job process (~1 ms each).
        from . import harness

        harness.warm_up()
        warmup.warm_up()  # the judge and the program side, likewise
        gc.collect()
        gc.freeze()  # keep the warm heap out of the children's garbage collections (less copy-on-write)
        linux.trim_heap()
        is_pid1 = bool(report["pid_ns"]) and os.getpid() == 1
        runner_settings = {
            "uid": self.run_uid,
            "gid": self.run_gid,
            "judge_uid": int(settings.get("judge_uid", 65533)) if drop else None,
            "drop_capabilities": not drop and bool(report["user_ns"]),
            "judge_in_server": bool(settings.get("judge_in_server", True)),
        }
        self.fatal = self._self_test(needed, runner_settings)
        if settings["guard"]:
            # Once, here: every job process inherits it. From now on this process only calls
            # the originals of what the guard disables (guard.REAL).
            install_guard(allow_subprocesses=bool(settings["allow_subprocesses"]),
                          block_network=bool(settings["block_network"]))
        # The clean fork point, taken before any job: every job process is forked from it.
        self.zygote = Zygote(child_main)
        # From now on (the zygote, and so every job process, keeps the normal policy): when a
        # job process wakes this process (a reply of the program, its output), it is not
        # preempted for it but goes on until it blocks or its time slice ends (-12 % CPU per
        # HumanEval job when replies came in batches; with one call per round trip, as now, no
        # difference either way). Deadlines are then enforced up to a time slice late.
        try:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        except (AttributeError, OSError):  # pragma: no cover - not Linux, or refused
            pass
        self.supervisor = Supervisor(is_pid1=is_pid1, zygote=self.zygote, judge_uid=runner_settings["judge_uid"])
        # Jobs running as another user cannot write to the (root-owned) hidden-path masks.
        wipe_all = self.run_uid is None
        self.runner = JobRunner(runner_settings, self.supervisor, self.job_dir,
                                lambda: self.view.wipe(private_only=not wipe_all))
        self.isolation = {
            **{k: v for k, v in report.items() if k != "notes"},
            "private_tmp": bool(self.view.private_dirs),
            "private_proc": self.view.proc_mounted,
            "hidden_paths": [m for m in self.view.masks if m not in self.view.private_dirs],
            "privileges_dropped": self.run_uid is not None,
            "judge_uid": runner_settings["judge_uid"],
            "seccomp": build_filter() is not None,
            "readable_allow_list": bool(self.view.masks) and settings.get("readable_paths") is not None,
            "run_uid": os.getuid() if self.run_uid is None else self.run_uid,
            "run_gid": os.getgid() if self.run_gid is None else self.run_gid,
            "running_as_root": root,
            "subreaper": not is_pid1,
            "pid_ns_per_job": self.supervisor.pid_ns_per_job,
            "job_dir": self.job_dir,
            "notes": list(report["notes"]) + self.view.notes,
        }

    def serve(self, sock: _socket.socket) -> None:
        frames = P.FrameReader(sock)
        while True:
            try:
                request = frames.read()
            except (EOFError, OSError, P.ProtocolError):
                return
            op = request.get("op") if isinstance(request, dict) else None
            if op == "job":
                reply = self.runner.run(request["job"])
                reply["id"] = request.get("id")
            elif op == "ping":
                reply = {"op": "pong", "id": request.get("id")}
            else:
                return
            try:
                P.send_frame(sock, reply, reply.pop("_blobs", ()))
            except OSError:
                return
            # Only now: the caller already has its reply while the job's files are deleted and
            # what it may have changed of this process is reset (its processes are gone before the
            # reply, but without pidfds or PID namespaces). A job that cannot be cleaned up ends
            # this worker (the caller starts a fresh one): the next job must not see anything of it.
            if op == "job" and not self.runner.cleanup():
                os._exit(3)

    def _self_test(self, needed: list[str], s: dict[str, Any]) -> str | None:
        """Fork a confined process and check it can read Python's files and write its directory."""
        job_dir = self.job_dir
        os.mkdir(job_dir, 0o700)
        read_fd, write_fd = os.pipe()
        null = os.open(os.devnull, os.O_RDWR)
        try:
            if s["uid"] is not None:
                REAL.chown(job_dir, s["uid"], s["gid"])
            pid = REAL.fork()
            if pid == 0:  # pragma: no cover - child
                try:
                    confine(ChildSpec(job_dir=job_dir, env=None, stdin_fd=null, stdout_fd=null,
                                      stderr_fd=null, result_fd=write_fd, uid=s["uid"], gid=s["gid"],
                                      drop_capabilities=s["drop_capabilities"]))
                    for path in needed:
                        if os.path.isdir(path):
                            os.listdir(path)
                        else:
                            open(path, "rb").close()
                    with open(os.path.join(job_dir, "probe"), "w") as f:
                        f.write("ok")
                    os._exit(0)
                except BaseException as exc:  # noqa: BLE001
                    try:
                        os.write(RESULT_FD, f"{type(exc).__name__}: {exc}".encode()[:2000])
                    finally:
                        os._exit(1)
            os.close(write_fd)
            write_fd = -1
            message = b""
            while True:
                chunk = os.read(read_fd, 4096)
                if not chunk:
                    break
                message += chunk
            _, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) == 0:
                return None
            who = f"uid {s['uid']}" if s["uid"] is not None else "the job user"
            return (f"a confined job process ({who}) cannot work: {message.decode(errors='replace') or status}. "
                    "Make the Python installation readable by that user, allow mount namespaces, "
                    "or set SandboxConfig(drop_privileges=False) (weaker isolation).")
        finally:
            for fd in (read_fd, write_fd, null):
                if fd >= 0:
                    os.close(fd)
            remove_path(job_dir)
