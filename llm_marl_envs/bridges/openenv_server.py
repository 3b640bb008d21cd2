"""Serve any registered task over OpenEnv's HTTP protocol (reset / step / state), standard library only.

OpenEnv (``openenv`` 0.10) has one action stream per session and no notion of seats, so a task is
served in one of two modes:

- **one open seat** (``seat="listener"``): the client plays that seat; every other seat is played
  server-side by the task module's scripted policies (``partners``: seat -> policy name such as
  ``"best_policy"`` or a callable ``policy(env, agent)``);
- **hot seat** (``seat=None``): the client plays every seat in turn; each observation names the
  acting agent (``observation["agent"]``).

Endpoints, with OpenEnv's request/response shapes: ``POST /reset`` ``{"seed", "episode_id"}`` ->
``{"observation", "reward", "done", "metadata"}``; ``POST /step`` ``{"action": {"text"}, "episode_id"}``
-> the same shape, ``reward`` being the team reward earned since the client's last step;
``GET /state?episode_id=...``; ``GET /health``; ``GET /schema``. Sessions are keyed by
``episode_id`` (OpenEnv's reset field; the server makes one when absent and returns it in
``metadata``), so concurrent clients play independent episodes. The server binds 127.0.0.1 by
default. The ``openenv`` package itself is not needed (its server stack pulls FastAPI, Gradio and
MCP); :class:`SeatClient` is a small client speaking the same protocol.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from llm_marl_envs.bridges import BridgeError, advance, check_seats, make_task_env, task_module, task_spec

Policy = Callable[[Any, str], Any]


@dataclass
class _Session:
    env: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    steps: int = 0
    paid: float = 0.0  # team return already reported to the client


class SeatServer:
    """An OpenEnv-protocol HTTP server for ``task`` (see the module docstring); ``url`` once started."""

    def __init__(self, task: str, seat: str | None = None, *, partners: Mapping[str, str | Policy] | None = None,
                 env_kwargs: Mapping[str, Any] | None = None, host: str = "127.0.0.1", port: int = 0,
                 max_steps: int = 10_000) -> None:
        task_spec(task)
        self.task, self.seat, self.env_kwargs, self.max_steps = task, seat, dict(env_kwargs or {}), max_steps
        agents = make_task_env(task, self.env_kwargs).possible_agents
        if seat is not None:
            check_seats(task, agents, [seat])
        given = dict(partners or {})
        check_seats(task, agents, list(given), what="partner seat")
        others = [a for a in agents if a != seat] if seat is not None else []
        self.partners = {a: self._policy(given.get(a, "best_policy")) for a in others}
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), _handler(self))
        self._thread: threading.Thread | None = None

    def _policy(self, policy: str | Policy) -> Policy:
        if callable(policy):
            return policy
        module = task_module(self.task)
        fn = getattr(module, policy, None)
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

    def start(self) -> SeatServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> SeatServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ protocol
    def reset(self, body: Mapping[str, Any]) -> dict:
        episode_id = str(body.get("episode_id") or uuid.uuid4().hex)
        env = make_task_env(self.task, self.env_kwargs)
        env.reset(seed=body.get("seed"))
        session = _Session(env)
        with self._lock:
            self._sessions[episode_id] = session
        with session.lock:
            return self._respond(episode_id, session)

    def step(self, body: Mapping[str, Any]) -> dict:
        episode_id = str(body.get("episode_id") or "")
        session = self._session(episode_id)
        action = body.get("action")
        if not isinstance(action, Mapping) or "text" not in action:
            raise BridgeError('step needs {"action": {"text": ...}, "episode_id": ...}')
        with session.lock:
            if session.env.unwrapped.record.done:
                raise BridgeError(f"episode {episode_id!r} is over; reset to play another")
            session.env.step(action["text"])
            session.steps += 1
            return self._respond(episode_id, session)

    def state(self, episode_id: str) -> dict:
        session = self._session(episode_id)
        with session.lock:
            env = session.env
            return {"episode_id": episode_id, "step_count": session.steps, "task": self.task, "seat": self.seat,
                    "agents": list(env.possible_agents), "team_return": env.unwrapped.record.total_reward,
                    "done": env.unwrapped.record.done}

    def _session(self, episode_id: str) -> _Session:
        with self._lock:
            session = self._sessions.get(episode_id)
        if session is None:
            raise BridgeError(f"unknown episode_id {episode_id!r}: call /reset first")
        return session

    def _respond(self, episode_id: str, session: _Session) -> dict:
        env = session.env
        agent = advance(env, self.partners, self.max_steps)
        record = env.unwrapped.record
        reward, session.paid = record.total_reward - session.paid, record.total_reward
        shown = agent or self.seat or env.possible_agents[0]
        observation = {"agent": shown, "text": env.observe(shown)["text"], "chat": env.observe_chat(shown),
                       "acting": int(agent is not None)}
        components = record.turns[-1].components if record.turns else {}
        return {"observation": observation, "reward": reward, "done": record.done,
                "metadata": {"episode_id": episode_id, "team_return": record.total_reward,
                             "reward_components": dict(components)}}


def _handler(server: SeatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _guard(self, fn: Callable[[], Any]) -> None:
            try:
                self._send(200, fn())
            except (BridgeError, TypeError, ValueError) as exc:
                self._send(400, {"error": str(exc)})

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urllib.parse.urlparse(self.path)
            query = urllib.parse.parse_qs(url.query)
            if url.path == "/health":
                self._send(200, {"status": "healthy"})
            elif url.path == "/state":
                self._guard(lambda: server.state(query.get("episode_id", [""])[0]))
            elif url.path == "/schema":
                self._send(200, {"action": {"text": "string"},
                                 "observation": {"agent": "string", "text": "string", "chat": "list", "acting": "int"}})
            else:
                self._send(404, {"error": f"no route {url.path}"})

        def do_POST(self) -> None:  # noqa: N802
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            except json.JSONDecodeError as exc:
                self._send(400, {"error": f"the body is not JSON: {exc}"})
                return
            if self.path == "/reset":
                self._guard(lambda: server.reset(body))
            elif self.path == "/step":
                self._guard(lambda: server.step(body))
            else:
                self._send(404, {"error": f"no route {self.path}"})

    return Handler


class SeatClient:
    """A client of :class:`SeatServer` (or any server speaking its protocol) for one session."""

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
