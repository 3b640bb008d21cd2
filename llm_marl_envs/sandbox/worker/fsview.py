"""The fork server's private view of the file system (inside its own mount namespace).

* ``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run/lock`` (configurable) become fresh,
  size-limited tmpfs mounts private to this worker: jobs never see the host's temporary
  files, cannot leave files behind in them (they are wiped after every job) and cannot fill
  the host's disk. The first one holds the job directory and gets ``tmpfs_size_mb``; the
  others at most 16 MB (tmpfs contents are RAM).
* ``/root`` and ``/home`` (configurable) are hidden behind empty tmpfs mounts.
* Every directory Python needs (its prefixes and ``sys.path``) is made reachable again, read
  only, at its usual path: a directory hidden by the two rules above, or behind a directory
  the unprivileged job user may not traverse (e.g. a pyenv install under a 0700 ``/root``),
  is bind-mounted back in place on an otherwise empty tmpfs.
* With a PID namespace, ``/proc`` is remounted so jobs only see their worker's processes.

Everything is best effort: what failed is listed in ``FsView.notes`` and the fork server's
start-up self-test decides whether the result is usable.
"""

from __future__ import annotations

import os
import stat
import sys

from . import linux
from .guard import REAL

INODES_PER_MB = 64  # inodes of a private temporary directory per MB of its size (nr_inodes)

_PRESERVED_FLAGS = linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC | 1024 | 2048
_ST_RELATIME = 4096
_MS_RELATIME = 1 << 21


class FsView:
    """What :func:`setup_fs_view` achieved, and what must be wiped after each job."""

    def __init__(self) -> None:
        self.masks: list[str] = []  # tmpfs mounted here
        self.private_dirs: list[str] = []  # world-writable tmpfs (temp dirs)
        self.exposed: set[str] = set()  # read-only binds re-exposing needed paths
        self.skeleton: set[str] = set()  # directories created to hold the binds
        self.proc_mounted = False
        self.notes: list[str] = []
        # Masks whose size tells whether a job left anything in them: their size when clean.
        # On tmpfs a directory's size counts its entries, so one stat() replaces a scan.
        self.clean_sizes: dict[str, int] = {}

    @property
    def job_root(self) -> str | None:
        """A private temporary directory to create job directories in (None: use the host's)."""
        return self.private_dirs[0] if self.private_dirs else None

    def wipe(self, private_only: bool = False) -> bool:
        """Delete everything jobs may have created in the masked directories; True if done.

        ``private_only``: only the world-writable ones (jobs run as a user who cannot write
        to the root-owned 0755 masks of hidden paths).
        """
        ok = True
        for mask in self.private_dirs if private_only else self.masks:
            clean = self.clean_sizes.get(mask)
            if clean is not None:
                try:
                    if os.stat(mask).st_size == clean:
                        continue
                except OSError:
                    pass
            ok = _wipe(mask, self.exposed, self.skeleton) and ok
        return ok


def python_paths() -> list[str]:
    """Directories (or zip files) the interpreter imports modules from (``sys.path``)."""
    out = {os.path.realpath(p) for p in sys.path if p}
    return sorted(p for p in out if os.path.exists(p))


def setup_fs_view(
    *,
    private_dirs: list[str],
    hidden_paths: list[str],
    needed_paths: list[str],
    run_uid: int,
    run_gid: int,
    tmpfs_size_mb: int,
    mount_proc: bool,
    readable_paths: list[str] | None = None,
) -> FsView:
    """Make the private view; ``readable_paths`` (None: no allow-list) are all jobs may read
    of the host, besides ``needed_paths`` (Python's own directories)."""
    view = FsView()
    try:
        linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    except OSError as exc:
        view.notes.append(f"cannot make mounts private ({exc}); file system view unchanged")
        return view
    if mount_proc:
        try:
            linux.mount("proc", "/proc", "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
            view.proc_mounted = True
        except OSError as exc:
            view.notes.append(f"cannot mount a private /proc ({exc})")
    # Jobs running as another user cannot write into the directories made to hold the
    # re-exposed paths (ours, 0755), nor remove or rename our entries of a sticky (1777)
    # private directory: the size of such a mask then still tells whether a job left anything.
    jobs_are_another_user = run_uid != os.geteuid()
    private = {os.path.realpath(p) for p in private_dirs}
    main_private = os.path.realpath(private_dirs[0]) if private_dirs else None
    candidates = private | {os.path.realpath(p) for p in hidden_paths}
    if readable_paths is not None:
        hidden, exposed = _outside_allow_list(readable_paths)
        candidates |= hidden
        needed_paths = sorted(set(needed_paths) | exposed)
        _hide_top_level_files(view, readable_paths)
    for path in needed_paths:
        candidates.update(_blocking_ancestors(path, run_uid, run_gid))
    for mask in sorted(candidates, key=lambda p: (p.count("/"), p)):
        if mask in private and not os.path.lexists(mask) and any(_is_within(mask, m) for m in view.masks):
            try:  # a private directory inside a masked one (/var/tmp in /var): make its mount point
                os.makedirs(mask, 0o755)
                view.skeleton.add(mask)
            except OSError:
                pass
        if mask == "/" or not os.path.isdir(mask) or os.path.islink(mask) or (mask in view.skeleton and mask not in private):
            continue
        if any(_is_within(mask, n) for n in needed_paths):
            continue  # masking it would hide (part of) something Python needs
        is_private = mask in private
        size = tmpfs_size_mb if mask == main_private else min(tmpfs_size_mb, 16) if is_private else 1
        # nr_inodes: an empty file costs no size but ~1 KB of kernel memory, counted nowhere else
        inodes = max(1024, size * INODES_PER_MB) if is_private else 256
        options = f"mode={'1777' if is_private else '0755'},size={size}m,nr_inodes={inodes}"
        try:
            _mask(view, mask, options, needed_paths)
        except OSError as exc:
            view.notes.append(f"cannot mask {mask} ({exc})")
            continue
        view.masks.append(mask)
        if (is_private and jobs_are_another_user) or not any(_is_within(p, mask) for p in view.exposed | view.skeleton):
            try:
                view.clean_sizes[mask] = os.stat(mask).st_size  # a fresh tmpfs, plus our skeleton
            except OSError:  # pragma: no cover
                pass
        if mask == main_private:
            view.private_dirs.insert(0, mask)  # the job directories go there (see job_root)
        elif is_private:
            view.private_dirs.append(mask)
    _hide_ptys(view)
    return view


def _hide_ptys(view: FsView) -> None:
    """No pseudo-terminals: the host's devpts instance is shared by every process of the machine
    (its ptys are a host-wide, uncounted resource, and two jobs running as the same uid could read
    each other's through it). ``/dev/pts`` gets an empty tmpfs and ``/dev/ptmx`` is ``/dev/null``
    (``os.openpty()`` fails)."""
    if os.path.isdir("/dev/pts") and not os.path.islink("/dev/pts"):
        try:
            linux.mount("tmpfs", "/dev/pts", "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "mode=0755,size=4k,nr_inodes=4")
        except OSError as exc:
            view.notes.append(f"cannot hide /dev/pts ({exc})")
    if os.path.exists("/dev/ptmx") and not os.path.islink("/dev/ptmx"):
        try:
            linux.mount("/dev/null", "/dev/ptmx", None, linux.MS_BIND)
        except OSError as exc:
            view.notes.append(f"cannot hide /dev/ptmx ({exc})")


def _outside_allow_list(readable: list[str]) -> tuple[set[str], set[str]]:
    """(directories to hide, paths to re-expose) for an allow-list of readable paths.

    A top-level directory named whole stays as it is; one of which only entries are named
    (``/etc/passwd``) is hidden and those entries re-exposed; any other is hidden.
    """
    whole, partial, exposed = set(), set(), set()
    for path in readable:
        parts = [p for p in os.path.normpath(path).split("/") if p]
        if not parts:
            continue
        if len(parts) == 1:
            whole.add(parts[0])
        else:
            partial.add(parts[0])
            if os.path.lexists(path):
                exposed.add(os.path.realpath(path) if os.path.islink(path) else path)
    hidden = set()
    for entry in os.listdir("/"):
        path = "/" + entry
        if entry in whole or os.path.islink(path) or not os.path.isdir(path):
            continue
        hidden.add(path)
    return hidden | {"/" + p for p in partial - whole}, exposed


def _hide_top_level_files(view: FsView, readable: list[str]) -> None:
    """Regular files directly in / (not named in ``readable``) read as empty (/dev/null over them)."""
    allowed = {os.path.normpath(p) for p in readable}
    for entry in os.listdir("/"):
        path = "/" + entry
        if path in allowed or os.path.islink(path) or not os.path.isfile(path):
            continue
        try:
            linux.mount("/dev/null", path, None, linux.MS_BIND)
        except OSError as exc:
            view.notes.append(f"cannot hide {path} ({exc})")


def _mask(view: FsView, mask: str, options: str, needed_paths: list[str]) -> None:
    inside = [n for n in needed_paths if _is_within(n, mask) and n != mask]
    inside = [n for n in inside if not any(o != n and _is_within(n, o) for o in inside)]
    fds = {}
    try:
        for path in inside:
            fds[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        linux.mount("tmpfs", mask, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, options)
        old_umask = os.umask(0o022)
        try:
            for path, fd in fds.items():
                _expose(view, mask, path, fd)
        finally:
            os.umask(old_umask)
    finally:
        for fd in fds.values():
            os.close(fd)


def _expose(view: FsView, mask: str, path: str, fd: int) -> None:
    is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
    parent = path if is_dir else os.path.dirname(path)
    current = mask
    for part in os.path.relpath(parent, mask).split(os.sep):
        if part in ("", "."):
            continue
        current = os.path.join(current, part)
        if not os.path.isdir(current):
            os.mkdir(current, 0o755)
        view.skeleton.add(current)
    if not is_dir:
        with open(path, "a"):
            pass
    try:
        linux.mount(f"/proc/self/fd/{fd}", path, None, linux.MS_BIND | linux.MS_REC)
    except OSError as exc:
        view.notes.append(f"cannot re-expose {path} ({exc})")
        return
    view.exposed.add(path)
    flags = os.statvfs(path).f_flag
    ro = linux.MS_BIND | linux.MS_REMOUNT | linux.MS_RDONLY | (flags & _PRESERVED_FLAGS)
    if flags & _ST_RELATIME:
        ro |= _MS_RELATIME
    try:
        linux.mount(None, path, None, ro)
    except OSError as exc:
        view.notes.append(f"{path} re-exposed read-write ({exc})")


def _blocking_ancestors(path: str, uid: int, gid: int) -> list[str]:
    """Ancestors of ``path`` that ``uid``/``gid`` may not traverse."""
    out = []
    current = os.path.dirname(path)
    while current not in ("/", ""):
        try:
            st = os.stat(current)
        except OSError:
            break
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid == gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            out.append(current)
        current = os.path.dirname(current)
    return out


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _wipe(directory: str, exposed: set[str], skeleton: set[str]) -> bool:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return False
    ok = True
    for entry in entries:
        if entry.path in exposed:
            continue
        if entry.path in skeleton:
            ok = _wipe(entry.path, exposed, skeleton) and ok
            continue
        ok = remove_path(entry.path) and ok
    return ok


def remove_path(path: str) -> bool:
    """Delete a file or a whole tree, whatever a job did to it; True if it is gone.

    Works on directory file descriptors without following symbolic links, iteratively (a
    job may nest directories deeper than PATH_MAX or Python's recursion limit), and restores
    permissions a job removed. Only called when every job process is dead (no races).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if not stat.S_ISDIR(st.st_mode):
            REAL.unlink(path)
            return True
        parent = os.open(os.path.dirname(path) or "/", os.O_RDONLY | os.O_DIRECTORY)
        try:
            _remove_tree_at(parent, os.path.basename(path))
        finally:
            os.close(parent)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return not os.path.lexists(path)


def _open_dir(name: str, parent_fd: int) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        return os.open(name, flags, dir_fd=parent_fd)
    except PermissionError:  # a job chmod-ed it (matters when not running as root)
        REAL.chmod(name, 0o700, dir_fd=parent_fd)
        return os.open(name, flags, dir_fd=parent_fd)


def _remove_tree_at(parent_fd: int, name: str) -> None:
    # Stack of (directory fd, its name, its parent's fd); fds are closed on the way back up.
    stack = [(_open_dir(name, parent_fd), name, parent_fd)]
    try:
        while stack:
            fd, dir_name, dir_parent = stack[-1]
            subdir = None
            for entry in os.scandir(fd):
                if entry.is_dir(follow_symlinks=False):
                    subdir = entry.name
                    break
                try:
                    REAL.unlink(entry.name, dir_fd=fd)
                except FileNotFoundError:
                    pass
            if subdir is not None:
                stack.append((_open_dir(subdir, fd), subdir, fd))
                continue
            stack.pop()
            os.close(fd)
            REAL.rmdir(dir_name, dir_fd=dir_parent)
    finally:
        for fd, _name, _parent in stack:
            os.close(fd)
