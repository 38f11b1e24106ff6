"""Hostile run content in a real browser: headless Chromium, driven over its DevTools pipe,
opens the viewer's pages of an audit run whose task file, finding and model reply carry
`<script>` and `onerror` payloads; the rendered DOM holds no injected element, the payload
is visible as text, and a screenshot of each page is saved in the test's directory."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from metaeval.models.scripted import ScriptedModel
from metaeval.protocols.audit.run import AuditRun
from metaeval.protocols.audit.settings import AuditSettings
from test_view import PAYLOAD, REQUIRED, hostile_bench, hostile_finding, start_viewer, stop


class Chromium:
    """Headless Chromium driven over its DevTools pipe (fd 3 in, fd 4 out; JSON messages ending
    in NUL), so a test can look at a page while it lives."""

    def __init__(self, binary: str, profile: Path):
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def fds() -> None:
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--proxy-server=http://127.0.0.1:9", f"--user-data-dir={profile}",
             "--remote-debugging-pipe", "about:blank"],
            pass_fds=(3, 4), preexec_fn=fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._id = 0
        self.session = ""

    def request(self, method: str, **params: object) -> dict:
        """The whole reply to one DevTools command (its result, or its error)."""
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._read, 1 << 16)
                assert chunk, "chromium closed its DevTools pipe"
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                return reply

    def call(self, method: str, **params: object) -> dict:
        reply = self.request(method, **params)
        assert "error" not in reply, reply
        return reply["result"]

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", url=url)["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]

    def js(self, expression: str) -> object:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def wait(self, expression: str, value: object, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while self.js(expression) != value:
            assert time.monotonic() < deadline, f"{expression} never became {value!r}"
            time.sleep(0.1)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        os.close(self._write)
        os.close(self._read)

    def screenshot(self, path: Path) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=1280, height=900,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))


def chromium() -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        if REQUIRED:
            pytest.fail("chromium not installed (scripts/install-system-deps.sh installs it)")
        pytest.skip("chromium not installed")
    return binary


# what the page must not have: an element or handler from the run, or a title the payload set
INJECTED = (
    "[document.querySelectorAll('script:not([src=\"/static/view.js\"])').length,"
    " document.querySelectorAll('[onerror],[onload],#pwned-marker').length,"
    " document.querySelectorAll('main img, main script').length, document.title]"
)


@pytest.mark.bwrap
def test_hostile_pages_render_payloads_as_text_in_chromium(tmp_path: Path) -> None:
    bench = hostile_bench(tmp_path)
    lines = (bench / "sales-revenue" / "instruction.md").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.startswith("Note:"))
    models = {"scripted/x": ScriptedModel([json.dumps([hostile_finding(line)])], name="scripted/x")}
    settings = AuditSettings(
        bench_dir=bench, run_dir=tmp_path / "runs" / "hostile", models=list(models),
        task_filter=["sales-revenue"], execution_checks=False, progress=False,
    )  # fmt: skip
    AuditRun(settings, models=models).run()
    viewer = start_viewer(str(tmp_path / "runs"))
    browser = Chromium(chromium(), tmp_path / "profile")
    try:
        rid = viewer.run_id("hostile")
        index = re.search(
            rf'href="/run/{rid}/finding/(\d+)">Checker mismatch', viewer.page(f"/run/{rid}")
        ).group(1)
        pages = {"run": f"/run/{rid}", "finding": f"/run/{rid}/finding/{index}"}
        for name, path in pages.items():
            browser.open(viewer.url.rstrip("/") + path)
            # the viewer's own script ran (it marks the root element) under the page's CSP
            browser.wait("document.documentElement.getAttribute('data-js')", "on")
            scripts, handlers, images, title = browser.js(INJECTED)  # type: ignore[misc]
            assert (scripts, handlers, images) == (0, 0, 0), name
            assert title != "PWNED"  # the payload would set exactly this title
            text = browser.js("document.body.innerText")
            assert isinstance(text, str)
            assert "Checker mismatch <script>alert(1)</script>" in text  # visible, as text
            if name == "finding":
                assert f"Note: {PAYLOAD}" in text  # the task file's line, highlighted
                hit = browser.js("document.querySelector('tr.hit pre').textContent")
                assert hit == f"Note: {PAYLOAD}"
                assert "desc <img src=x onerror=" in text  # the description
                assert '"title": "Checker mismatch <script>' in text  # the model's reply
            shot = tmp_path / f"{name}.png"
            browser.screenshot(shot)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    finally:
        browser.close()
        stop(viewer)
