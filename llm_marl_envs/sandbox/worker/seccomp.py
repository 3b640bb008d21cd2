"""A seccomp filter for job processes: system calls that escape the per-process limits.

Installed by every job process after its confinement (:mod:`.child`), inherited by all it
forks, and irrevocable. It refuses (``EPERM``):

* memory that RLIMIT_AS does not count, and objects that would outlive the job:
  ``memfd_create``, ``memfd_secret``, and every SysV and POSIX IPC object (``shmget``,
  ``msgget``, ``semget``, ``mq_open``), so the worker's IPC namespace never holds anything of
  a job (a fresh IPC namespace per job cost 8-15 ms per job on the 2-core VM: the kernel
  tears the previous one down; see docs/sandbox.md). POSIX semaphores and shared memory
  (``multiprocessing``) are files in the private, size-limited ``/dev/shm``, wiped after each job;
* more CPU than the worker's share: ``setsid`` (every session gets its own scheduler
  autogroup, i.e. its own CPU share) and ``sched_setaffinity`` (leaving the worker's CPU);
* ways around the namespaces and other processes: ``unshare``, ``setns``, ``clone`` with any
  ``CLONE_NEW*`` flag, the mount calls, ``ptrace``, ``process_vm_readv/writev``,
  ``pidfd_getfd``, ``io_uring`` (its operations bypass seccomp), ``bpf``,
  ``perf_event_open``, ``userfaultfd``, the key-ring calls, module loading, ``kexec``;
* kernel objects that are host-wide, charged to no job and outside every namespace the worker
  has: ``inotify_init``/``inotify_init1`` and ``fanotify_init`` (instances and watches are
  counted per host user, and a watch on a bind-mounted host directory shows which files host
  processes open), ``io_setup`` (the machine-wide AIO request pool), and ``socket``/``socketpair``
  of any family but ``AF_UNIX``, ``AF_INET`` and ``AF_INET6`` (``AF_VSOCK``, ``AF_PACKET``,
  ``AF_NETLINK``, Bluetooth, ... are not all confined by the network namespace). Pseudo-terminals
  are not a system call: the file-system view (:mod:`.fsview`) hides ``/dev/ptmx`` and ``/dev/pts``;
* locks (``ENOLCK``): ``flock`` and the ``fcntl`` lock commands (POSIX and open-file-description
  locks, set or tested). The host's files a job can read are the host's own inodes (bind mounts,
  ``/usr``, ``/dev/null``): a lock on one blocks host processes that lock it, and jobs of different
  workers can pass bits to each other through them. ``F_NOTIFY`` (dnotify: which files of a host
  directory anyone reads or writes) is refused as inotify is (``EPERM``);
* knobs that outlive the process or reach beyond the job: ``prctl(PR_SET_DUMPABLE)`` (a job
  process stays non-dumpable, see :mod:`.child`) and ``prctl(PR_SCHED_CORE)`` (a core-scheduling
  cookie keeps other jobs off the sibling hyperthread).

``clone3`` gets ``ENOSYS`` (its flags live in memory a filter cannot read), so the C library
falls back to ``clone``, whose flags are checked. Calls of another architecture's ABI (32-bit
``int 0x80``, x32) kill the process. The filter is a hand-written classic BPF program (no
libseccomp needed), built once in the fork server; installing it in a job costs one
``prctl``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X86_64 = {
    "memfd_create": 319, "memfd_secret": 447, "shmget": 29, "msgget": 68, "semget": 64, "mq_open": 240,
    "setsid": 112,
    "sched_setaffinity": 203, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166,
    "pivot_root": 155, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "pidfd_getfd": 438, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250, "add_key": 248,
    "request_key": 249, "init_module": 175, "finit_module": 313, "delete_module": 176,
    "kexec_load": 246, "kexec_file_load": 320, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "chroot": 161,
    "inotify_init": 253, "inotify_init1": 294, "fanotify_init": 300, "io_setup": 206,
}
_AARCH64 = {
    "memfd_create": 279, "memfd_secret": 447, "shmget": 194, "msgget": 186, "semget": 190, "mq_open": 180,
    "setsid": 157,
    "sched_setaffinity": 122, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39,
    "pivot_root": 41, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
    "pidfd_getfd": 438, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "keyctl": 219, "add_key": 217,
    "request_key": 218, "init_module": 105, "finit_module": 273, "delete_module": 106,
    "kexec_load": 104, "kexec_file_load": 294, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "chroot": 51,
    "inotify_init1": 26, "fanotify_init": 262, "io_setup": 0,
}
_TABLES = {"x86_64": (_X86_64, 56, 435), "aarch64": (_AARCH64, 220, 435)}  # (denied, clone, clone3)
_LOCK_CALLS = {"x86_64": (73, 72, 157), "aarch64": (32, 25, 167)}  # flock, fcntl, prctl
_LOCK_COMMANDS = (5, 6, 7, 36, 37, 38)  # F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW
_F_NOTIFY = 1026
_PRCTL_DENIED = (4, 62)  # PR_SET_DUMPABLE, PR_SCHED_CORE
_SOCKET_CALLS = {"x86_64": (41, 53), "aarch64": (198, 199)}  # socket, socketpair
_FAMILIES = (1, 2, 10)  # AF_UNIX, AF_INET, AF_INET6: the only socket families allowed
_CLONE_NEW = 0x7E020000  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def build_filter(machine: str | None = None) -> bytes | None:
    """The BPF program for this machine (None: no table for its architecture)."""
    machine = machine or os.uname().machine
    if machine not in _TABLES:
        return None
    denied, clone, clone3 = _TABLES[machine]
    eperm, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    prog = [_insn(_LD_W_ABS, 4), _insn(_JEQ, _ARCH[machine], 1, 0), _insn(_RET, _KILL_PROCESS), _insn(_LD_W_ABS, 0)]
    if machine == "x86_64":
        prog += [_insn(_JGE, 0x40000000, 0, 1), _insn(_RET, _KILL_PROCESS)]  # the x32 ABI
    for nr in sorted(set(denied.values())):
        prog += [_insn(_JEQ, nr, 0, 1), _insn(_RET, eperm)]
    prog += [_insn(_JEQ, clone3, 0, 1), _insn(_RET, enosys)]
    flock, fcntl, prctl = _LOCK_CALLS[machine]
    enolck = _ERRNO | errno.ENOLCK
    prog += [_insn(_JEQ, flock, 0, 1), _insn(_RET, enolck)]
    prog += _argument_block(fcntl, 1, [(cmd, enolck) for cmd in _LOCK_COMMANDS] + [(_F_NOTIFY, eperm)])
    prog += _argument_block(prctl, 0, [(option, eperm) for option in _PRCTL_DENIED])
    # socket/socketpair: the family is the first argument; any other than _FAMILIES is refused.
    for nr in _SOCKET_CALLS[machine]:
        block = [_insn(_LD_W_ABS, 16)]
        block += [_insn(_JEQ, family, len(_FAMILIES) - k, 0) for k, family in enumerate(_FAMILIES)]
        block += [_insn(_RET, eperm), _insn(_RET, _ALLOW)]
        prog += [_insn(_JEQ, nr, 0, len(block))] + block
    # clone: its flags are the first argument (low 32 bits at offset 16 on little-endian machines).
    prog += [_insn(_JEQ, clone, 0, 3), _insn(_LD_W_ABS, 16), _insn(_JSET, _CLONE_NEW, 0, 1), _insn(_RET, eperm),
             _insn(_RET, _ALLOW)]
    return b"".join(prog)


def _argument_block(nr: int, arg: int, refused: list[tuple[int, int]]) -> list[bytes]:
    """For system call ``nr``: return each ``refused`` (value, action) whose value the low 32 bits
    of argument ``arg`` equal; allow the call otherwise. (Other calls jump over the block.)"""
    n = len(refused)
    block = [_insn(_LD_W_ABS, 16 + 8 * arg)]
    block += [_insn(_JEQ, value, n, 0) for value, _ in refused]  # to its RET, n instructions ahead
    block += [_insn(_RET, _ALLOW)] + [_insn(_RET, action) for _, action in refused]
    return [_insn(_JEQ, nr, 0, len(block))] + block


class PreparedFilter:
    """The filter and its ``prctl`` arguments, built in the fork server; call it in a job process."""

    def __init__(self) -> None:
        program = build_filter()
        self.available = program is not None
        if program is None:  # pragma: no cover - other architectures
            return
        self._buffer = ctypes.create_string_buffer(program, len(program))

        class _Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        self._prog = _Prog(len(program) // 8, ctypes.addressof(self._buffer))
        libc = ctypes.CDLL(None, use_errno=True)
        self._call = libc["prctl"]
        self._call.restype = ctypes.c_int
        zero = ctypes.c_ulong(0)
        self._args = (ctypes.c_int(_PR_SET_SECCOMP), ctypes.c_ulong(_SECCOMP_MODE_FILTER),
                      ctypes.c_ulong(ctypes.addressof(self._prog)), zero, zero)

    def __call__(self) -> None:
        if not self.available:  # pragma: no cover
            return
        if self._call(*self._args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"seccomp: {os.strerror(err)}")
