"""Hostile programs that reach for what is outside their job: host files, the caller's
temporary files and secrets, the network, the caller's working directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile

import pytest

from ..conftest import server_pids
from .conftest import CALLER_CWD, CANARY, PRIVATE_DIRS, A, litter, outcome


@pytest.fixture(scope="module")
def outside_file():
    base = next(b for b in ("/opt", "/srv", "/var/lib", "/usr/local") if os.path.isdir(b) and os.access(b, os.W_OK))
    directory = tempfile.mkdtemp(prefix="sbx-outside-", dir=base)
    os.chmod(directory, 0o755)
    path = os.path.join(directory, "precious.txt")
    with open(path, "w") as f:
        f.write("precious")
    os.chmod(path, 0o644)
    yield path
    shutil.rmtree(directory)


def test_files_outside_the_job_directory_are_untouched(sandbox, outside_file):
    program = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nP = " + repr(outside_file) + "\n"
        "def guard_remove():\n    os.remove(P)\n"
        "def libc_unlink():\n    return libc.unlink(P.encode()), ctypes.get_errno()\n"
        "def overwrite():\n    open(P, 'w').write('pwned')\n"
        "def create_next_to_it():\n    open(os.path.join(os.path.dirname(P), 'new.txt'), 'w')\n"
        "def rename():\n    return libc.rename(P.encode(), (P + '.moved').encode()), ctypes.get_errno()\n"
    )
    # With the allow-list of readable paths the directory is not even visible (ENOENT);
    # without a mount namespace the job user may not write there (EACCES).
    tests = [A("guard_remove()"), A("assert libc_unlink() in ((-1, 13), (-1, 2))"), A("overwrite()"),
             A("create_next_to_it()"), A("assert rename() in ((-1, 13), (-1, 2))")]
    res = sandbox.run(program, tests)
    denied = ("PermissionError", "FileNotFoundError")
    assert [t.passed for t in res.tests] == [False, True, False, False, True]
    assert res.tests[0].error_type == "PermissionError"  # (the guard)
    assert res.tests[2].error_type in denied and res.tests[3].error_type in denied
    assert sandbox.wait_idle()
    with open(outside_file) as f:
        assert f.read() == "precious"
    assert os.listdir(os.path.dirname(outside_file)) == ["precious.txt"]


def test_temporary_directories_are_private(sandbox, tmp_path):
    (tmp_path / "caller.txt").write_text("mine")
    marker = "sbx-marker-" + str(os.getpid())
    program = (
        "import os\ndef f():\n    open('/tmp/" + marker + "', 'w').write('x')\n"
        "    open('/dev/shm/" + marker + "', 'w').write('x')\n"
        "    return os.path.exists(" + repr(str(tmp_path)) + "), os.getcwd()\n"
    )
    res = sandbox.run(program, [A(f"assert f() == (False, {sandbox.isolation['job_dir']!r})")])
    assert outcome(res) == [(True, None)] and sandbox.wait_idle()
    assert not os.path.exists("/tmp/" + marker) and not os.path.exists("/dev/shm/" + marker)
    assert (tmp_path / "caller.txt").read_text() == "mine"


def test_whatever_a_job_leaves_in_the_temporary_directories_is_wiped(sandbox):
    if not sandbox.isolation["private_tmp"]:
        pytest.skip("no private temporary directories without a mount namespace")
    program = (
        "import ctypes, os\n"
        f"DIRS = {PRIVATE_DIRS!r}\n"
        "def litter():\n"
        "    made = []\n"
        "    for d in DIRS:\n"
        "        if os.access(d, os.W_OK):\n"
        "            os.makedirs(os.path.join(d, 'sbx-litter-dir', 'sub'))\n"
        "            open(os.path.join(d, 'sbx-litter-dir', 'sub', 'f'), 'w').write('x')\n"
        "            open(os.path.join(d, 'sbx-litter.txt'), 'w').write('x')\n"
        "            os.symlink('/etc/passwd', os.path.join(d, 'sbx-litter-link'))\n"
        "            made.append(d)\n"
        "    for d in made:  # created and deleted (os.unlink is guarded): nothing to wipe there\n"
        "        open(os.path.join(d, 'sbx-litter-gone'), 'w').close()\n"
        "        assert ctypes.CDLL(None).unlink(os.path.join(d, 'sbx-litter-gone').encode()) == 0\n"
        "    return made\n"
    )
    res = sandbox.run(program, [A("assert len(litter()) >= 2, litter()")])
    assert outcome(res) == [(True, None)]
    assert sandbox.wait_idle()
    for pid in server_pids(sandbox):
        assert litter(pid) == []


def test_secrets_of_the_caller_are_not_readable(sandbox):
    program = (
        "import os, glob\nprint(sorted(os.listdir('/root')), os.getuid(), os.getgid(), os.getgroups())\n"
        "seen = [repr(sorted(os.environ.items()))]\n"
        "for p in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline'):\n"
        "    try:\n        seen.append(open(p, 'rb').read().decode('latin-1'))\n"
        "    except OSError as e:\n        seen.append(type(e).__name__)\n"
        "def shadow():\n    open('/etc/shadow').read()\n"
        "print('\\n'.join(seen))\n"
    )
    res = sandbox.run(program, [A("shadow()")])
    assert outcome(res) in ([(False, "PermissionError")], [(False, "FileNotFoundError")])  # (hidden: not allow-listed)
    assert CANARY not in res.stdout and "SBX_SECRET_CANARY" not in res.stdout
    assert "'PATH', '/usr/local/bin:/usr/bin:/bin'" in res.stdout
    assert f"('HOME', {sandbox.isolation['job_dir']!r})" in res.stdout
    if sandbox.isolation["privileges_dropped"]:  # (worker i runs jobs as uid 65534 - 2i: uid_per_worker)
        assert any(f"{65534 - 2 * i} 65534 []" in res.stdout for i in range(sandbox.size))


def test_jobs_do_not_see_how_their_fork_server_was_started(sandbox):
    program = "import sys\nprint(sys.argv, sorted(vars(sys.modules['__main__'])))\n"
    res = sandbox.run(program, [A("pass")])
    assert res.stdout.strip() == "['solution.py'] ['__doc__', '__loader__', '__name__', '__package__', '__spec__']"


def test_no_network_even_to_a_local_listener(sandbox):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    port = listener.getsockname()[1]
    try:
        program = (
            "import socket, ctypes, struct\n"
            f"def python_level():\n    socket.create_connection(('127.0.0.1', {port}), timeout=0.5)\n"
            f"def raw_socket():\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(('127.0.0.1', {port}))\n"
            "def libc_level():\n    libc = ctypes.CDLL(None, use_errno=True)\n    fd = libc.socket(2, 1, 0)\n"
            f"    addr = struct.pack('!HH4s8x', 2, {port}, bytes([127, 0, 0, 1]))\n"
            "    addr = struct.pack('<H', 2) + addr[2:]\n"
            "    return libc.connect(fd, addr, 16), ctypes.get_errno()\n"
        )
        res = sandbox.run(program, [A("python_level()"), A("raw_socket()"), A("r = libc_level()\nassert r[0] == -1, r")])
        assert outcome(res) == [(False, "PermissionError"), (False, "PermissionError"), (True, None)]
        listener.settimeout(0.2)
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()


def test_chdir_does_not_confuse_the_harness(sandbox):
    # (The tests run in the judge's process: they see the program's state through its functions.)
    program = "import os\nos.chdir('/')\ndef f():\n    open('x.txt', 'w')\ndef cwd():\n    return os.getcwd()\n"
    res = sandbox.run(program, [A("assert cwd() == '/'"), A("f()")])
    assert outcome(res) == [(True, None), (False, "PermissionError")]
    assert os.getcwd() == CALLER_CWD
