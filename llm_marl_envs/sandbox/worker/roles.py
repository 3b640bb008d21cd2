"""What a process spawned by the zygote (:mod:`.zygote`) runs: confine itself, then its role.

Roles: ``judge`` (the set-up and assert tests, :mod:`.judge`), ``program`` (an assert-mode
program, :mod:`.program`) and ``io`` (an I/O-mode program, :mod:`.harness`). The command
(from the fork server) holds only limits and identities; the job data comes on descriptor 4,
a memfd the fork server wrote, read here before the process is confined.
"""

from __future__ import annotations

import json
import os
import traceback
from typing import Any, NoReturn

from .channel import Channel
from .child import RESULT_FD, ChildSpec, confine
from .harness import run_job_process
from .judge import run_judge_process
from .program import run_program_process

PAYLOAD_FD = 4
INFRA_EXIT_CODE = 121


def child_main(command: dict[str, Any], fds: list[int]) -> NoReturn:  # pragma: no cover - in the child
    role = command["role"]
    payload: dict[str, Any] = {}
    try:
        payload = json.loads(_read_all(fds[PAYLOAD_FD]))
        spec = ChildSpec(job_dir=command["job_dir"], env=None, stdin_fd=fds[0], stdout_fd=fds[1],
                         stderr_fd=fds[2], result_fd=fds[3], extra_fds=fds[4:], rlimits=command["rlimits"],
                         uid=command["uid"], gid=command["gid"], drop_capabilities=command["drop_caps"],
                         parent_death_signal=command["pdeath"], pgid=command["pgid"], seccomp=True)
        confine(spec)
        os.close(PAYLOAD_FD)
    except BaseException:  # noqa: BLE001
        if role == "program":  # (no result pipe: the judge reports the failure, with this)
            try:
                os.write(fds[2], traceback.format_exc(limit=5)[-2000:].encode())
            except OSError:
                pass
        _infra(payload.get("nonce"), fds[3] if len(fds) > 3 else -1)
    if role == "judge":
        run_judge_process(payload, PAYLOAD_FD + 1)
    elif role == "program":
        Channel(RESULT_FD).send(b'"up"')  # confined: whatever follows is the program's doing
        run_program_process(payload, RESULT_FD)
    else:
        run_job_process(payload, payload["nonce"], "io", [int(payload["index"])])
    os._exit(INFRA_EXIT_CODE)


def _read_all(fd: int) -> bytes:
    parts = []
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


def _infra(nonce: Any, fd: int) -> NoReturn:
    try:
        if isinstance(nonce, str) and fd >= 0:
            detail = traceback.format_exc(limit=5)[-2000:]
            line = f"{nonce} infra -1 0 0 " + json.dumps({"error": "job process set-up failed: " + detail}) + "\n"
            for target in (RESULT_FD, fd):
                try:
                    os.write(target, line.encode("ascii", "backslashreplace"))
                    break
                except OSError:
                    continue
    finally:
        os._exit(INFRA_EXIT_CODE)
