"""A fixed-latency OpenAI-compatible chat server for load tests: a real process on 127.0.0.1.

It answers `POST /v1/chat/completions` after exactly `--latency` seconds with a Chat
Completions body whose message is `--reply` (default `{"findings": []}`), and `GET /v1/models`.
HTTP/1.1 keep-alive, asyncio, standard library only, so one process serves hundreds of
concurrent connections without adding latency of its own.

Rate limiting (for adaptive-concurrency tests): with a capacity set, a request that arrives
while `capacity` requests are already in service gets `429 Too Many Requests` at once, with
`retry-after-ms: --retry-after-ms`. The capacity can be changed while running:
`POST /control {"capacity": N}` (null = unlimited).

Every request is logged: `GET /stats` returns `{"events": [[t_arrival, t_end, status,
in_service_at_arrival], ...], "peak_in_service": N, "connections": N}` with `time.time()`
timestamps, so a client can see its first request's arrival, the concurrency it really
achieved and how many connections carried its chat requests.

Usage: python bench/latency_server.py --latency 1.0 [--port 0] [--capacity N]
It prints `PORT <n>` on stdout once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from typing import Any


class State:
    """Counters shared by all connections of the server."""

    def __init__(self, latency: float, reply: str, capacity: int | None, retry_after_ms: int):
        self.latency = latency
        self.reply = reply
        self.capacity = capacity
        self.retry_after_ms = retry_after_ms
        self.in_service = 0
        self.peak = 0
        self.events: list[list[Any]] = []
        self.served = 0
        self.connections = 0


def completion(state: State, body: dict[str, Any]) -> dict[str, Any]:
    state.served += 1
    return {
        "id": f"chatcmpl-{state.served}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "latency"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": state.reply},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105},
    }


async def respond(
    writer: asyncio.StreamWriter,
    status: int,
    payload: Any,
    extra: dict[str, str] | None = None,
) -> None:
    data = json.dumps(payload).encode()
    reason = {200: "OK", 404: "Not Found", 429: "Too Many Requests", 400: "Bad Request"}
    head = [
        f"HTTP/1.1 {status} {reason.get(status, 'OK')}",
        "content-type: application/json",
        f"content-length: {len(data)}",
        "connection: keep-alive",
    ]
    head += [f"{k}: {v}" for k, v in (extra or {}).items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
    await writer.drain()


async def handle(state: State, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    chat_seen = False  # a connection counts once it carries a chat request
    try:
        while True:
            line = await reader.readline()
            if not line:
                return
            method, target, _ = line.decode("latin-1").split(" ", 2)
            path = target.split("?", 1)[0].rstrip("/")
            if not chat_seen and path.endswith("/chat/completions"):
                chat_seen = True
                state.connections += 1
            headers: dict[str, str] = {}
            while True:
                h = await reader.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            raw = await reader.readexactly(int(headers.get("content-length", "0") or 0))
            await route(state, method, path, raw, writer)
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        return
    finally:
        writer.close()


async def route(
    state: State, method: str, path: str, raw: bytes, writer: asyncio.StreamWriter
) -> None:
    """Answer one request; `path` is without its query string and trailing slash."""
    if method == "GET" and path.endswith("/models"):
        await respond(writer, 200, {"object": "list", "data": [{"id": "latency"}]})
    elif method == "GET" and path == "/stats":
        stats = {
            "events": state.events,
            "peak_in_service": state.peak,
            "connections": state.connections,
        }
        await respond(writer, 200, stats)
    elif method == "POST" and path == "/control":
        body = json.loads(raw or b"{}")
        if "capacity" in body:
            state.capacity = body["capacity"]
        await respond(writer, 200, {"capacity": state.capacity})
    elif method == "POST" and path.endswith("/chat/completions"):
        arrived = time.time()
        if state.capacity is not None and state.in_service >= state.capacity:
            state.events.append([arrived, arrived, 429, state.in_service])
            await respond(
                writer,
                429,
                {"error": {"message": "rate limited", "type": "rate_limit_exceeded"}},
                {"retry-after-ms": str(state.retry_after_ms)},
            )
            return
        state.in_service += 1
        state.peak = max(state.peak, state.in_service)
        event = [arrived, None, 200, state.in_service]
        state.events.append(event)
        try:
            await asyncio.sleep(state.latency)
        finally:
            state.in_service -= 1
        event[1] = time.time()
        await respond(writer, 200, completion(state, json.loads(raw or b"{}")))
    else:
        await respond(writer, 404, {"error": {"message": f"no route {method} {path}"}})


async def serve(args: argparse.Namespace) -> None:
    state = State(args.latency, args.reply, args.capacity, args.retry_after_ms)
    server = await asyncio.start_server(
        lambda r, w: handle(state, r, w), "127.0.0.1", args.port, backlog=4096
    )
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per request")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--reply", default='{"findings": []}', help="assistant message content")
    parser.add_argument("--capacity", type=int, default=None, help="429 above this many")
    parser.add_argument("--retry-after-ms", type=int, default=200)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args))


if __name__ == "__main__":
    main()
