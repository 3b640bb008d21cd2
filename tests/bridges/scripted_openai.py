"""An OpenAI-compatible chat endpoint on the loopback that answers as a task's scripted policy.

The bridges' own runners (verifiers' harness program, :func:`~baselines.bridges.trl_env.openai_partner`)
talk to a model over HTTP; in tests this endpoint stands in for the model. It keeps a shadow copy of
the episode: each request is the next acting seat's turn (the runners play seats one at a time, in the
env's order), checked against the seat's system prompt, and is answered with the task's
``best_policy`` on the shadow env (streamed as server-sent events when the request asks for it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import llm_marl_envs
from llm_marl_envs.bridges import advance


class ScriptedOpenAI:
    """Serve ``/v1/chat/completions`` for one episode of ``task`` at ``seed``; ``url`` is the ``/v1`` base."""

    def __init__(self, task: str, env_kwargs: Mapping[str, Any], seed: int = 0) -> None:
        spec = llm_marl_envs.spec(task)
        self.policy = spec.load().best_policy
        self.shadow = spec.make(**dict(env_kwargs))
        self.shadow.reset(seed=seed)
        self.turns: list[str] = []  # the seats answered, in order
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def answer(self, messages: list[dict]) -> str:
        with self._lock:
            agent = advance(self.shadow, {})
            if agent is None:
                self.errors.append("a request after the episode ended")
                return ""
            system = self.shadow.observe_chat(agent)[0]["content"]
            if not messages or messages[0].get("content") != system:
                self.errors.append(f"turn of {agent!r} asked with another system prompt: {messages[:1]!r:.200}")
            reply = str(self.policy(self.shadow, agent))
            self.shadow.step(reply)
            self.turns.append(agent)
            return reply

    def __enter__(self) -> ScriptedOpenAI:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler(server: ScriptedOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            reply, model = server.answer(body.get("messages") or []), body.get("model", "scripted")
            head = {"id": "scripted", "created": 0, "model": model}
            usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            if body.get("stream"):
                chunk = {**head, "object": "chat.completion.chunk"}
                events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": reply},
                                                 "finish_reason": None}]},
                          {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                          {**chunk, "choices": [], "usage": usage}]
                data = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode() + b"data: [DONE]\n\n"
                kind = "text/event-stream"
            else:
                data = json.dumps({**head, "object": "chat.completion", "usage": usage, "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}]}).encode()
                kind = "application/json"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
