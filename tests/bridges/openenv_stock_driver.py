"""Runs in a separate environment holding only ``openenv`` 0.10 (and its client's imports): OpenEnv's stock
``GenericEnvClient`` driven by commands on stdin, one JSON object a line; one JSON answer a line on stdout.

Commands: ``{"op": "connect", "url"}``, ``{"op": "reset", "seed"}``, ``{"op": "step", "text"}``,
``{"op": "state"}``, ``{"op": "close"}``, ``{"op": "exec", "code"}`` (what the code prints),
``{"op": "schema", "url"}`` (``/schema`` and ``/health``
parsed with OpenEnv's own response models), ``{"op": "quit"}``. Answers: ``{"ok": true, "result": ...}``
or ``{"ok": false, "error": "<type>: <message>"}``. Nothing here imports this repository.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any


def _result(step: Any) -> dict:
    return {"observation": step.observation, "reward": step.reward, "done": step.done, "metadata": step.metadata}


def main() -> None:
    import requests
    from openenv.core import GenericEnvClient
    from openenv.core.env_server.types import HealthResponse, SchemaResponse

    client = None
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        try:
            if op == "quit":
                break
            if op == "connect":
                client = GenericEnvClient(base_url=command["url"]).sync()
                client.connect()
                result: Any = None
            elif op == "reset":
                result = _result(client.reset(seed=command["seed"]))
            elif op == "step":
                result = _result(client.step({"text": command["text"]}))
            elif op == "state":
                result = client.state()
            elif op == "close":
                client.close()
                client, result = None, None
            elif op == "exec":  # a documented client example; what it prints
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    exec(compile(command["code"], "example", "exec"), {})
                result = out.getvalue()
            elif op == "schema":
                schema = SchemaResponse.model_validate(requests.get(command["url"] + "/schema", timeout=10).json())
                health = HealthResponse.model_validate(requests.get(command["url"] + "/health", timeout=10).json())
                result = {"schema": schema.model_dump(), "health": health.status.value}
            else:
                raise ValueError(f"unknown op {op!r}")
            answer = {"ok": True, "result": result}
        except Exception as exc:  # noqa: BLE001 - reported to the test
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)
    if client is not None:
        client.close()


if __name__ == "__main__":
    main()
