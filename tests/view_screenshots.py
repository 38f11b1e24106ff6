"""Screenshots of each kind of viewer page at 1280x900, for docs/img/ (run by hand):

    python tests/view_screenshots.py RUNS_DIR [RUNS_DIR ...] -o docs/img

Starts `metaeval view` on the folders, opens one page of each kind in headless Chromium
(a page found by following the links of the one before it), saves `view-KIND.png` and prints,
per page, whether anything is wider than the window."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from test_view import start_viewer, stop  # noqa: E402
from test_view_browser import Chromium  # noqa: E402

WIDE = (
    "Array.from(document.querySelectorAll('main *')).filter(e => e.getBoundingClientRect().right"
    " > innerWidth + 1 && !e.closest('.table-wrap, .svg-wrap, pre')).length"
)


def first(pattern: str, html: str) -> str:
    found = re.search(pattern, html)
    assert found, pattern
    return found.group(1).replace("&amp;", "&")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+")
    parser.add_argument("-o", "--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    viewer = start_viewer(*args.runs)
    binary = shutil.which("chromium") or "chromium"
    browser = Chromium(binary, Path(tempfile.mkdtemp(prefix="shots-")))
    try:
        home = viewer.page("/")
        runs = dict(re.findall(r'href="/run/([^"]+)">([^<]+)</a>', home))
        pages = {"runs": "/"}
        for rid in runs:
            html = viewer.page(f"/run/{rid}")
            if "Audit:" in html and "audit-run" not in pages:
                pages["audit-run"] = f"/run/{rid}"
                pages["audit-finding"] = first(r'href="(/run/[^"]+/finding/\d+)"', html)
            if "Build-and-find:" in html and "(run)" in html and "buildfind" not in pages:
                pages["buildfind"] = f"/run/{rid}"
                pages["cell"] = first(r'href="(/run/[^"]+/cell\?[^"]+)"', html)
                pages["build"] = first(r'href="(/run/[^"]+/build\?[^"]+)"', html)
                pages["questions"] = f"/run/{rid}/questions"
                pages["find"] = first(
                    r'href="(/run/[^"]+/find\?[^"]+)"', viewer.page(pages["cell"])
                )
            if "Improve bundle:" in html and "improve" not in pages:
                pages["improve"] = f"/run/{rid}"
                pages["trial"] = first(r'href="(/run/[^"]+/trial/\d+)"', html)
        ids = list(runs)
        if len(ids) > 1:
            pages["diff"] = f"/diff?a={ids[0]}&b={ids[1]}"
        for kind, path in pages.items():
            browser.open(viewer.url.rstrip("/") + path)
            browser.call("Emulation.setDeviceMetricsOverride", width=1280, height=900,
                         deviceScaleFactor=1, mobile=False)  # fmt: skip
            deadline = time.monotonic() + 60
            while browser.js("document.documentElement.getAttribute('data-js')") != "on":
                assert time.monotonic() < deadline, path
                time.sleep(0.1)
            wide = browser.js(WIDE)
            width = browser.js("[document.documentElement.scrollWidth, innerWidth]")
            browser.screenshot(args.out / f"view-{kind}.png")
            print(f"{kind}: {path} elements wider than the window: {wide}; page width {width}")
    finally:
        browser.close()
        stop(viewer)


if __name__ == "__main__":
    main()
