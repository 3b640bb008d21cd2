"""Serve any registered task with OpenEnv's protocol (``openenv`` 0.10), standard library only.

OpenEnv has one action stream per session and no notion of seats, so a task is served in one of
two modes:

- **one open seat** (``seat="listener"``): the client plays that seat; every other seat is played
  server-side by the task module's scripted policies (``partners``: seat -> policy name such as
  ``"best_policy"`` or a callable ``policy(env, agent)``);
- **hot seat** (``seat=None``): the client plays every seat in turn; each observation names the
  acting agent (``observation["agent"]``).

The protocol is OpenEnv's: the WebSocket session endpoint ``/ws`` its stock clients
(``GenericEnvClient``, ``EnvClient`` subclasses) speak -- one session per connection, messages
``{"type": "reset" | "step" | "state" | "close", "data": ...}`` answered with ``{"type":
"observation" | "state" | "error", "data": ...}`` -- and its HTTP endpoints ``POST /reset``,
``POST /step``, ``GET /state``, ``GET /health``, ``GET /schema``, ``GET /metadata``, with its
request and response shapes (:mod:`.openenv_http` is the transport). OpenEnv's own HTTP
endpoints keep no episode between calls; here ``/reset`` opens a session and returns its
``episode_id`` in ``metadata``, and ``/step`` and ``/state`` name it (an extra field OpenEnv's
step request allows). Sessions idle for ``limits.session_ttl_s`` expire; bodies, headers,
connections and sessions are bounded and reads time out (:class:`ServerLimits`). The
``openenv`` package itself is not needed: its server pulls FastAPI, Gradio and MCP, and its MCP
pin conflicts with verifiers'. :class:`SeatClient` is a small HTTP client of the same protocol.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llm_marl_envs.bridges import BridgeError, advance, check_seats, make_task_env, task_module, task_spec
from llm_marl_envs.bridges.openenv_http import RequestError, ServerLimits, make_http_server

__all__ = ["RequestError", "SeatClient", "SeatServer", "ServerLimits"]

Policy = Callable[[Any, str], Any]


@dataclass
class _Session:
    env: Any
    episode_id: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    steps: int = 0
    paid: float = 0.0  # team return already reported to the client
    used: float = field(default_factory=time.monotonic)
    on_expire: Callable[[], None] | None = None  # a WebSocket session's: tell the client, close the connection


def _schemas() -> dict[str, Any]:
    """OpenEnv's ``/schema`` response: JSON schemas of the action, the observation and the state."""
    text = {"type": "string"}
    return {
        "action": {"title": "SeatAction", "type": "object", "additionalProperties": False, "required": ["text"],
                   "properties": {"text": {**text, "description": "the acting seat's whole reply"},
                                  "metadata": {"type": "object", "default": {}}}},
        "observation": {"title": "SeatObservation", "type": "object", "required": ["agent", "text", "chat", "acting"],
                        "properties": {
                            "agent": {**text, "description": "the seat to act (the open seat once the episode ends)"},
                            "text": {**text, "description": "that seat's observation text"},
                            "chat": {"type": "array", "items": {"type": "object", "properties": {
                                "role": text, "content": text}}},
                            "acting": {"type": "integer", "enum": [0, 1]},
                            "done": {"type": "boolean", "default": False},
                            "reward": {"type": ["number", "null"], "default": None},
                            "metadata": {"type": "object", "default": {}}}},
        "state": {"title": "SeatState", "type": "object", "additionalProperties": True, "properties": {
            "episode_id": {"type": ["string", "null"]}, "step_count": {"type": "integer", "minimum": 0},
            "task": text, "seat": {"type": ["string", "null"]}, "agents": {"type": "array", "items": text},
            "team_return": {"type": "number"}, "done": {"type": "boolean"}}},
    }


class SeatServer:
    """An OpenEnv-protocol server for ``task`` (see the module docstring); ``url`` once started."""

    def __init__(self, task: str, seat: str | None = None, *, partners: Mapping[str, str | Policy] | None = None,
                 env_kwargs: Mapping[str, Any] | None = None, host: str = "127.0.0.1", port: int = 0,
                 max_steps: int = 10_000, limits: ServerLimits | None = None) -> None:
        task_spec(task)
        self.task, self.seat, self.env_kwargs, self.max_steps = task, seat, dict(env_kwargs or {}), max_steps
        self.limits = limits or ServerLimits()
        agents = make_task_env(task, self.env_kwargs).possible_agents
        if seat is not None:
            check_seats(task, agents, [seat])
        given = dict(partners or {})
        check_seats(task, agents, list(given), what="partner seat")
        others = [a for a in agents if a != seat] if seat is not None else []
        self.partners = {a: self._policy(given.get(a, "best_policy")) for a in others}
        self.schemas = _schemas()
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = make_http_server(self, host, port)
        self._threads: list[threading.Thread] = []

    def _policy(self, policy: str | Policy) -> Policy:
        if callable(policy):
            return policy
        fn = getattr(task_module(self.task), policy, None)
        if fn is None:
            raise BridgeError(f"{self.task}'s module has no policy {policy!r}")
        if policy == "random_policy":
            rng = np.random.default_rng(0)
            return lambda env, agent: fn(env, agent, rng)
        return fn

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def session_count(self) -> int:
        with self._lock:
            return len(self._sessions)

    def start(self) -> SeatServer:
        self._threads = [threading.Thread(target=self._httpd.serve_forever, args=(0.1,), daemon=True),
                         threading.Thread(target=self._reap, daemon=True)]
        for t in self._threads:
            t.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            self._sessions.clear()

    def __enter__(self) -> SeatServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ sessions
    def _reap(self) -> None:
        while not self._stop.wait(min(self.limits.session_ttl_s / 2, 5.0)):
            self.expire()

    def expire(self) -> int:
        """Drop the sessions unused for ``limits.session_ttl_s`` (closing their WebSockets); returns how many."""
        cutoff = time.monotonic() - self.limits.session_ttl_s
        with self._lock:
            old = [self._sessions.pop(k) for k, s in list(self._sessions.items()) if s.used < cutoff]
        for session in old:
            if session.on_expire is not None:
                session.on_expire()
        return len(old)

    def open_session(self, episode_id: str | None = None, on_expire: Callable[[], None] | None = None) -> str:
        """Register a new (not yet reset) session; its key (``episode_id`` or a fresh one). ``on_expire`` is
        called if the session expires (a WebSocket's handler closes its connection)."""
        key = episode_id or uuid.uuid4().hex
        with self._lock:
            full = key not in self._sessions and len(self._sessions) >= self.limits.max_sessions
        if full:
            self.expire()
        with self._lock:
            if key not in self._sessions and len(self._sessions) >= self.limits.max_sessions:
                raise RequestError(503, f"the server holds {len(self._sessions)} sessions, its limit "
                                        f"(ServerLimits.max_sessions); retry later", "CAPACITY_REACHED")
            self._sessions[key] = _Session(None, key, on_expire=on_expire)
        return key

    def drop_session(self, key: str) -> None:
        with self._lock:
            self._sessions.pop(key, None)

    def _session(self, key: str) -> _Session:
        with self._lock:
            session = self._sessions.get(key)
        if session is None:
            raise RequestError(404, f"unknown or expired episode_id {key!r}: sessions unused for "
                                    f"{self.limits.session_ttl_s:g} s expire; call reset", "SESSION_ERROR")
        session.used = time.monotonic()
        return session

    # ------------------------------------------------------------------ protocol
    def reset(self, key: str | None, data: Mapping[str, Any]) -> dict:
        """Start a new episode in session ``key`` (``data``: OpenEnv's reset fields, ``seed`` used); ``key``
        None opens a session named by ``data["episode_id"]`` (or a fresh name), as HTTP ``/reset`` does."""
        seed, episode_id = data.get("seed"), data.get("episode_id")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise RequestError(422, f"reset: seed must be a non-negative integer or null, got {seed!r}")
        if episode_id is not None and (not isinstance(episode_id, str) or not 0 < len(episode_id) <= 128):
            raise RequestError(422, f"reset: episode_id must be a string of 1 to 128 characters, got {episode_id!r:.80}")
        if key is None:
            key = self.open_session(episode_id)
        session = self._session(key)
        if episode_id is not None:
            session.episode_id = episode_id
        env = make_task_env(self.task, self.env_kwargs)
        env.reset(seed=seed)
        with session.lock:
            session.env, session.steps, session.paid = env, 0, 0.0
            return self._respond(session)

    def step(self, key: str, action: Any) -> dict:
        """Play ``action`` (OpenEnv's action: ``{"text": ...}``) for the acting seat of session ``key``."""
        if not isinstance(action, Mapping) or not isinstance(action.get("text"), str):
            raise RequestError(422, f'step: the action must be an object {{"text": "<reply>"}}, got {action!r:.200}')
        extra = sorted(set(action) - {"text", "metadata"})
        if extra:
            raise RequestError(422, f"step: unknown action field(s) {extra}; the action has text (and metadata)")
        session = self._session(key)
        with session.lock:
            if session.env is None:
                raise RequestError(409, "step before reset: call reset first", "SESSION_ERROR")
            if session.env.unwrapped.record.done:
                raise RequestError(409, f"episode {session.episode_id!r} is over; reset to play another",
                                   "SESSION_ERROR")
            session.env.step(action["text"])
            session.steps += 1
            return self._respond(session)

    def state(self, key: str) -> dict:
        """OpenEnv's state of session ``key``: ``episode_id``, ``step_count`` and the episode's summary."""
        session = self._session(key)
        with session.lock:
            env = session.env
            record = env.unwrapped.record if env is not None else None
            return {"episode_id": session.episode_id, "step_count": session.steps, "task": self.task,
                    "seat": self.seat, "agents": list(env.possible_agents) if env is not None else [],
                    "team_return": record.total_reward if record else 0.0, "done": bool(record and record.done)}

    def metadata(self) -> dict:
        """OpenEnv's ``/metadata`` (EnvironmentMetadata)."""
        mode = f"seat {self.seat!r} open, the others scripted" if self.seat else "hot seat (the client plays every seat)"
        return {"name": self.task, "description": f"llm_marl_envs task {self.task}: {mode}", "version": None}

    def _respond(self, session: _Session) -> dict:
        env = session.env
        agent = advance(env, self.partners, self.max_steps)
        record = env.unwrapped.record
        reward, session.paid = record.total_reward - session.paid, record.total_reward
        shown = agent or self.seat or env.possible_agents[0]
        components = record.turns[-1].components if record.turns else {}
        metadata = {"episode_id": session.episode_id, "team_return": record.total_reward,
                    "reward_components": dict(components)}
        observation = {"agent": shown, "text": env.observe(shown)["text"], "chat": env.observe_chat(shown),
                       "acting": int(agent is not None), "metadata": metadata}
        return {"observation": observation, "reward": reward, "done": record.done, "metadata": metadata}


class SeatClient:
    """A small HTTP client of :class:`SeatServer` for one session (OpenEnv's own clients use ``/ws``)."""

    def __init__(self, base_url: str, timeout: float = 60.0) -> None:
        self.base_url, self.timeout, self.episode_id = base_url.rstrip("/"), timeout, None

    def _call(self, path: str, body: Mapping[str, Any] | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 (local server)
                return json.load(response)
        except urllib.error.HTTPError as exc:
            raise BridgeError(json.load(exc).get("error", str(exc))) from None

    def reset(self, seed: int | None = None, episode_id: str | None = None) -> dict:
        out = self._call("/reset", {"seed": seed, "episode_id": episode_id})
        self.episode_id = out["metadata"]["episode_id"]
        return out

    def step(self, text: str) -> dict:
        return self._call("/step", {"action": {"text": text}, "episode_id": self.episode_id})

    def state(self) -> dict:
        return self._call(f"/state?episode_id={urllib.parse.quote(str(self.episode_id))}")


def main(argv: list[str] | None = None) -> None:
    """``python -m llm_marl_envs.bridges.openenv_server TASK [--seat SEAT] [--port 8000] ...``: serve until Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m llm_marl_envs.bridges.openenv_server",
                                     description="Serve a registered task with OpenEnv's protocol (docs/bridges.md).")
    parser.add_argument("task")
    parser.add_argument("--seat", help="the seat the client plays (default: every seat in turn, hot seat)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--env-kwargs", default="{}", help="the task's keyword arguments, as JSON")
    defaults = ServerLimits()
    flags = {"max_body_bytes": "--max-body-bytes", "read_timeout_s": "--read-timeout", "session_ttl_s": "--session-ttl",
             "max_sessions": "--max-sessions", "max_connections": "--max-connections"}  # ServerLimits' fields
    for name, flag in flags.items():
        value = getattr(defaults, name)
        parser.add_argument(flag, dest=name, type=type(value), default=value, help=f"ServerLimits.{name} ({value})")
    args = parser.parse_args(argv)
    limits = ServerLimits(**{name: getattr(args, name) for name in flags})
    server = SeatServer(args.task, args.seat, env_kwargs=json.loads(args.env_kwargs), host=args.host, port=args.port,
                        limits=limits).start()
    print(f"serving {args.task} ({'seat ' + args.seat if args.seat else 'hot seat'}) at {server.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
