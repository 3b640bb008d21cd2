"""Benchmark: the OpenEnv seat server under a loopback soak -- memory, descriptors, threads and sessions stay flat.

Run: ``python -m llm_marl_envs.bench.openenv_soak [--task code/helper_main_v0] [--sessions 3000] [--ttl 5]``

One :class:`~llm_marl_envs.bridges.openenv_server.SeatServer` (hot seat, the task's test settings) in
this process takes ``--sessions`` sessions from clients on the loopback, in a fixed rotation:
HTTP episodes played to the end and HTTP episodes abandoned after ``/reset``; WebSocket episodes
played to the end and closed, and WebSocket connections dropped without a close; and, every
fourth request, a malformed one (a JSON list or string body, a non-numeric or 64 MB
``Content-Length``, a truncated body, an unknown route, a bad WebSocket message). Every
malformed request must get its 4xx. Sessions expire after ``--ttl`` seconds idle.

Figures: resident memory (MB), open descriptors, threads and open sessions after a warm-up (the
first tenth of the load) and at the end (after one ``--ttl`` for the last sessions to expire),
and the end / warm-up ratio of each (flat = 1.0). Reference, measured in the same run: the same
number of abandoned sessions on a server whose sessions never expire (``--ttl`` infinite), i.e.
what the soak would hold without expiry (the MB it adds per 1,000 sessions).
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import threading
import time
from typing import Any

import llm_marl_envs
from llm_marl_envs.bridges import advance
from llm_marl_envs.bridges.openenv_server import SeatServer, ServerLimits
from llm_marl_envs.bridges.websocket import WebSocketClient

_BAD_HTTP = [  # (request bytes, expected status)
    (b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n[1,2]", 422),
    (b'POST /step HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"hi!"', 422),
    (b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}", 400),
    (b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\n" + b"x" * 65536, 413),
    (b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{not json", 400),
    (b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", 404),
    (b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{}", 408),  # truncated: read timeout
]
_BAD_WS = ["{not json", "[1, 2]", '{"type": "jump"}', '{"type": "step", "data": {"text": 3}}']


def usage() -> dict[str, float]:
    """This process's resident memory (MB), open descriptors and threads."""
    gc.collect()
    with open("/proc/self/status") as fh:
        rss = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
    return {"rss_mb": rss / 1024, "fds": len(os.listdir("/proc/self/fd")), "threads": threading.active_count()}


def raw_request(port: int, data: bytes, timeout: float = 10.0) -> int:
    """Send ``data`` as is on a new connection; the response's status."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        head = sock.makefile("rb").readline()
    return int(head.split()[1])


class Load:
    """The soak's clients for one server; each method is one session (or one malformed request)."""

    def __init__(self, server: SeatServer, task: str, kwargs: dict[str, Any]) -> None:
        self.server, self.port = server, server._httpd.server_address[1]
        self.spec, self.kwargs = llm_marl_envs.spec(task), kwargs
        self.policy = self.spec.load().best_policy
        self.bad = 0

    def _http(self, path: str, body: dict) -> dict:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            response = conn.getresponse()
            out = json.loads(response.read())
            if response.status != 200:
                raise RuntimeError(f"{path}: {response.status} {out}")
            return out
        finally:
            conn.close()

    def _play(self, seed: int, step) -> None:
        shadow = self.spec.make(**self.kwargs)
        shadow.reset(seed=seed)
        out = step(None)
        while not out["done"]:
            agent = advance(shadow, {})
            action = self.policy(shadow, agent)
            shadow.step(action)
            out = step(action)

    def http_finished(self, seed: int) -> None:
        state: dict = {}

        def step(action):
            if action is None:
                out = self._http("/reset", {"seed": seed})
                state["id"] = out["metadata"]["episode_id"]
                return out
            return self._http("/step", {"episode_id": state["id"], "action": {"text": action}})

        self._play(seed, step)

    def http_abandoned(self, seed: int) -> None:
        self._http("/reset", {"seed": seed})

    def ws_finished(self, seed: int) -> None:
        client = WebSocketClient("127.0.0.1", self.port)

        def step(action):
            message = {"type": "reset", "data": {"seed": seed}} if action is None else {"type": "step",
                                                                                          "data": {"text": action}}
            client.send(json.dumps(message))
            reply = json.loads(client.receive())
            if reply["type"] != "observation":
                raise RuntimeError(f"ws: {reply}")
            return reply["data"]

        try:
            self._play(seed, step)
        finally:
            client.close()

    def ws_abandoned(self, seed: int) -> None:
        client = WebSocketClient("127.0.0.1", self.port)
        client.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
        client.receive()
        client.abandon()

    def malformed(self, i: int) -> None:
        if i % 2:
            data, status = _BAD_HTTP[(i // 2) % len(_BAD_HTTP)]
            got = raw_request(self.port, data)
            if got != status:
                raise RuntimeError(f"malformed request {data[:60]!r}: {got}, expected {status}")
        else:
            client = WebSocketClient("127.0.0.1", self.port)
            client.send(_BAD_WS[(i // 2) % len(_BAD_WS)])
            reply = json.loads(client.receive())
            client.close()
            if reply["type"] != "error":
                raise RuntimeError(f"malformed message: {reply}")
        self.bad += 1

    def run(self, start: int, count: int) -> None:
        kinds = [self.http_finished, self.http_abandoned, self.ws_finished, self.ws_abandoned]
        for i in range(start, start + count):
            if i % 4 == 3:
                self.malformed(i // 4)
            kinds[i % 4](i)


def _wait_expired(server: SeatServer, ttl: float, threads: int) -> None:
    """Wait (up to ``ttl`` + 10 s) until every session expired and only ``threads`` threads are left."""
    deadline = time.monotonic() + ttl + 10.0
    while time.monotonic() < deadline:
        time.sleep(min(ttl, 1.0) / 4)
        server.expire()
        if server.session_count == 0 and threading.active_count() <= threads:
            return


def soak(task: str = "toy/signal_game_v0", sessions: int = 3000, ttl: float = 1.0,
         read_timeout: float = 0.2) -> dict[str, Any]:
    """The soak (see the module docstring); its figures."""
    kwargs = dict(llm_marl_envs.spec(task).test_kwargs)
    limits = ServerLimits(session_ttl_s=ttl, read_timeout_s=read_timeout, max_sessions=max(1024, sessions))
    idle_threads = threading.active_count() + 2  # this process's, and the server's listener and reaper
    with SeatServer(task, env_kwargs=kwargs, limits=limits) as server:
        load = Load(server, task, kwargs)
        warm = sessions // 10
        load.run(0, warm)
        _wait_expired(server, ttl, idle_threads)
        before = {**usage(), "sessions": server.session_count}
        t0 = time.perf_counter()
        load.run(warm, sessions - warm)
        seconds = time.perf_counter() - t0
        peak = server.session_count
        _wait_expired(server, ttl, idle_threads)
        after = {**usage(), "sessions": server.session_count}
    with SeatServer(task, env_kwargs=kwargs, limits=ServerLimits(session_ttl_s=1e9, max_sessions=sessions)) as ref:
        held = Load(ref, task, kwargs)
        start = usage()["rss_mb"]
        for i in range(sessions // 2):
            held.http_abandoned(i)
        kept = {"sessions": ref.session_count, "mb": usage()["rss_mb"] - start}
    return {"task": task, "sessions": sessions, "malformed": load.bad, "seconds": seconds, "peak_sessions": peak,
            "before": before, "after": after, "reference": kept}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="code/helper_main_v0")
    parser.add_argument("--sessions", type=int, default=3000)
    parser.add_argument("--ttl", type=float, default=5.0, help="seconds a session may sit idle")
    args = parser.parse_args(argv)
    out = soak(args.task, args.sessions, args.ttl)
    b, a, r = out["before"], out["after"], out["reference"]
    print(f"{out['task']}: {out['sessions']} sessions ({out['malformed']} malformed requests mixed in, all answered "
          f"4xx) in {out['seconds']:.1f} s; at most {out['peak_sessions']} open at once")
    for key in ("rss_mb", "fds", "threads", "sessions"):
        ratio = f"{a[key] / b[key]:.2f}" if b[key] else ("flat" if a[key] == b[key] else "grew")
        print(f"  {key:8s} after warm-up {b[key]:8.1f}   at the end {a[key]:8.1f}   ratio {ratio}")
    per_k = 1000 * r["mb"] / max(r["sessions"], 1)
    print(f"  reference (no expiry): {r['sessions']} abandoned sessions held, +{r['mb']:.1f} MB ({per_k:.1f} MB per "
          f"1,000); the soak's growth after warm-up: {a['rss_mb'] - b['rss_mb']:+.1f} MB")
    return out


if __name__ == "__main__":
    main()
