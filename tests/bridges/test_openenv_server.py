"""OpenEnv-protocol seat server: concurrent sessions on the loopback reach the direct return; every bad request
gets a 4xx with a clear message; reads time out; idle sessions expire; a lean soak leaves nothing behind.
(OpenEnv's own stock client plays every task in ``test_openenv_stock_client.py``.)"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

import llm_marl_envs
from llm_marl_envs.bench.openenv_soak import soak
from llm_marl_envs.bridges import BridgeError
from llm_marl_envs.bridges.openenv_server import SeatClient, SeatServer, ServerLimits
from llm_marl_envs.bridges.websocket import WebSocketClient, WebSocketClosed
from llm_marl_envs.testing import play_episode

SIGNAL = "toy/signal_game_v0"


class _View:
    """What a remote player has: its observation text, shaped for a task's scripted policy."""

    message_words = None  # the default game: no code words, no private names (best_policy reads both)
    listener_name: dict = {}

    def __init__(self, text: str) -> None:
        self.text = text
        self.unwrapped = self

    def is_acting(self, agent: str) -> bool:
        return True

    def observe(self, agent: str) -> dict:
        return {"text": self.text, "acting": 1}


def _play(client: SeatClient, policy, seed: int) -> tuple[float, float]:
    out, total = client.reset(seed=seed), 0.0
    while not out["done"]:
        obs = out["observation"]
        out = client.step(policy(_View(obs["text"]), obs["agent"]))
        total += out["reward"]
    return total, out["metadata"]["team_return"]


def _raw(server: SeatServer, data: bytes, timeout: float = 10.0) -> tuple[int, dict, float]:
    """Send ``data`` as is on a new connection: the response's status, JSON body and seconds taken."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", server._httpd.server_address[1]), timeout=timeout) as sock:
        sock.sendall(data)
        stream = sock.makefile("rb")
        status = int(stream.readline().split()[1])
        headers = {}
        while (line := stream.readline().strip()):
            name, _, value = line.decode().partition(":")
            headers[name.lower()] = value.strip()
        body = json.loads(stream.read(int(headers.get("content-length", 0))) or b"{}")
    return status, body, time.monotonic() - t0


def _post(path: str, body: bytes, extra: str = "") -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


def test_two_concurrent_sessions_reach_the_direct_return():
    best = llm_marl_envs.spec(SIGNAL).load().best_policy
    kwargs = {"n_rounds": 3}
    with SeatServer(SIGNAL, "listener", env_kwargs=kwargs) as server:
        assert server.url.startswith("http://127.0.0.1:")
        results: dict[int, tuple[float, float]] = {}
        threads = [threading.Thread(target=lambda s=s: results.__setitem__(s, _play(SeatClient(server.url), best, s)))
                   for s in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert server.session_count == 2
    for seed in (0, 1):
        direct = play_episode(llm_marl_envs.make(SIGNAL, **kwargs), best, seed=seed)
        assert results[seed] == (direct, direct) == (3.0, 3.0)


def test_hot_seat_names_the_acting_agent_and_bad_sessions_are_clear():
    best = llm_marl_envs.spec(SIGNAL).load().best_policy
    with SeatServer(SIGNAL) as server:
        client = SeatClient(server.url)
        out = client.reset(seed=5)
        agents = []
        while not out["done"]:
            agents.append(out["observation"]["agent"])
            out = client.step(best(_View(out["observation"]["text"]), agents[-1]))
        assert agents == ["speaker", "listener"] and out["metadata"]["team_return"] == 1.0
        assert client.state()["done"] and client.state()["step_count"] == 2
        with pytest.raises(BridgeError, match="is over"):
            client.step("cat")
        with pytest.raises(BridgeError, match='needs the "episode_id" that /reset returned'):
            SeatClient(server.url).step("cat")  # OpenEnv's step request, without our session field
        stranger = SeatClient(server.url)
        stranger.episode_id = "nope"
        with pytest.raises(BridgeError, match="unknown or expired episode_id 'nope'"):
            stranger.step("cat")
    with pytest.raises(BridgeError, match="no seat 'talker'"):
        SeatServer(SIGNAL, "talker")
    with pytest.raises(llm_marl_envs.UnknownEnvironmentError):
        SeatServer("toy/nope_v0")


@pytest.mark.parametrize("request_bytes,status,message", [
    (_post("/reset", b"[1, 2]"), 422, "must be a JSON object, got a JSON list"),
    (_post("/step", b'"step"'), 422, "must be a JSON object, got a JSON str"),
    (_post("/reset", b"{not json"), 400, "the body is not JSON"),
    (_post("/reset", b"[" * 100_000), 400, "the body is not JSON"),  # nested too deep
    (b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: twelve\r\n\r\n{}", 400, "Content-Length must be a non-neg"),
    (b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\n" + b"x" * 65536, 413, "over the 1048576-byte"),
    (b"POST /reset HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411, "send a Content-Length"),
    (_post("/reset", b'{"seed": "zero"}'), 422, "seed must be a non-negative integer"),
    (_post("/step", b'{"episode_id": "x", "action": "cat"}'), 422, 'the action must be an object {"text"'),
    (_post("/step", b'{"action": {"text": "cat"}}'), 422, 'needs the "episode_id"'),
    (_post("/nope", b"{}"), 404, "no route POST /nope"),
    (b"PUT /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405, "method PUT is not served"),
    (b"GET /state HTTP/1.1\r\nHost: x\r\n\r\n", 422, 'needs the "episode_id"'),
    (b"GET /reset HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431, "header line is at most 64 KiB"),
    (b"GET /ws HTTP/1.1\r\nHost: x\r\n\r\n", 400, "WebSocket handshake"),
])
def test_every_bad_request_gets_a_4xx_with_a_clear_message(request_bytes, status, message):
    with SeatServer(SIGNAL) as server:
        got, body, _ = _raw(server, request_bytes)
        assert (got, body["error"][:0]) == (status, "") and message in body["error"], body
        assert SeatClient(server.url).reset(seed=0)["done"] is False  # the server still serves


def test_a_body_shorter_than_its_content_length_times_out_with_408():
    with SeatServer(SIGNAL, limits=ServerLimits(read_timeout_s=0.3)) as server:
        status, body, seconds = _raw(server, b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{}")
        assert status == 408 and "did not arrive within 0.3 s" in body["error"] and seconds < 5


def test_idle_sessions_expire_and_capacity_is_bounded():
    limits = ServerLimits(session_ttl_s=0.3, max_sessions=2)
    with SeatServer(SIGNAL, limits=limits) as server:
        first, second = SeatClient(server.url), SeatClient(server.url)
        first.reset(seed=0)
        second.reset(seed=1)
        status, body, _ = _raw(server, _post("/reset", b"{}"))
        assert status == 503 and body["code"] == "CAPACITY_REACHED" and "max_sessions" in body["error"]
        time.sleep(1.0)  # the reaper drops both (unused for 0.3 s)
        assert server.session_count == 0
        with pytest.raises(BridgeError, match="unknown or expired episode_id .* unused for 0.3 s expire"):
            first.step("cat")
        assert second.reset(seed=1)["done"] is False  # room again


def test_websocket_messages_get_openenv_errors_and_idle_sockets_expire():
    limits = ServerLimits(session_ttl_s=1.0, read_timeout_s=0.1, max_body_bytes=1000)
    with SeatServer(SIGNAL, limits=limits) as server:
        port = server._httpd.server_address[1]
        ws = WebSocketClient("127.0.0.1", port)
        for text, code in [("{not json", "INVALID_JSON"), ("[1]", "VALIDATION_ERROR"), ('{"type": "jump"}', "UNKNOWN_TYPE"),
                           ('{"type": "step", "data": {"text": "cat"}}', "SESSION_ERROR"),  # before reset
                           ('{"type": "reset", "data": {"seed": -1}}', "VALIDATION_ERROR")]:
            ws.send(text)
            reply = json.loads(ws.receive())
            assert reply["type"] == "error" and reply["data"]["code"] == code, (text, reply)
        assert ws.ping(b"are you there") == b"are you there"  # OpenEnv's client pings every 20 s
        ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
        assert json.loads(ws.receive())["type"] == "observation" and server.session_count == 1
        time.sleep(0.4)  # a client thinking longer than the read timeout (a model generating) is still served
        ws.send(json.dumps({"type": "step", "data": {"text": "egg"}}))
        assert json.loads(ws.receive())["type"] == "observation"
        ws.send("x" * 2000)  # over max_body_bytes: closed with 1009
        with pytest.raises(WebSocketClosed) as closed:
            ws.receive()
        assert closed.value.code == 1009
        idle = WebSocketClient("127.0.0.1", port)
        reply = json.loads(idle.receive())  # nothing sent for longer than the session TTL
        assert reply["data"]["code"] == "SESSION_ERROR" and "session expired after 1 s" in reply["data"]["message"]
        with pytest.raises(WebSocketClosed):
            idle.receive()
        time.sleep(0.2)
        assert server.session_count == 0


def test_a_lean_soak_leaves_no_session_thread_or_descriptor_behind():
    """The benchmark's load, small: abandoned and finished sessions over HTTP and WebSocket, malformed requests."""
    out = soak(SIGNAL, sessions=240, ttl=0.3, read_timeout=0.1)
    before, after = out["before"], out["after"]
    assert out["malformed"] == 60 and out["peak_sessions"] > 0
    assert after["sessions"] == 0 and after["threads"] <= before["threads"] and after["fds"] <= before["fds"]
    assert out["reference"]["sessions"] == 120  # without expiry they would all be held
