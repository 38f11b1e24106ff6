"""The smallest server built on the loopback kit, run as its own process by tests/test_loopback.py.

    python tests/loopback_app.py TOKEN TIMEOUT_S MAX_BODY_BYTES

Prints ``PORT N`` once it listens on 127.0.0.1. Every request passes the kit's rules in the
order a JSON API checks them (Host, web pages, token, media type); ``GET /`` answers
``ok``, ``POST /echo`` answers the decoded body's length and sha256 as JSON. Refusals are
plain text (the kit's default answer). Stops on SIGTERM.
"""

from __future__ import annotations

import hashlib
import json
import signal
import sys

from metaeval.loopback import access
from metaeval.loopback.framing import FramingError
from metaeval.loopback.server import BoundedHandler, LoopbackServer


class App(BoundedHandler):
    protocol_version = "HTTP/1.1"
    token = ""
    port = 0

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def _admit(self) -> bool:
        try:
            access.check_host(self.headers, self.port, "test app")
            access.refuse_web_pages(self.headers)
            access.check_token(access.bearer(self.headers), self.token, "wrong token")
            if self.command == "POST":
                access.check_media(self.headers, ("application/json", "+json"))
        except access.Refused as exc:
            self.refuse(exc)
            return False
        return True

    def _send(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        if self._admit():
            self.end_of_head()
            self._send(b"ok")

    def do_POST(self) -> None:  # noqa: N802
        if not self._admit():
            return
        try:
            body = self.body()
        except FramingError as exc:
            self.refuse(exc)
            return
        answer = {"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        self._send(json.dumps(answer).encode())


def main() -> None:
    token, timeout_s, limit = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    handler = type("Handler", (App,), {"token": token, "timeout_s": timeout_s})
    handler.max_body_bytes = limit
    server = LoopbackServer(("127.0.0.1", 0), handler)
    handler.port = server.server_address[1]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"PORT {handler.port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
