"""Take docs/serve_screenshot.png: the `mrecord serve` page on the gallery dataset.

Usage: ``python tools/serve_screenshot.py [--out docs/serve_screenshot.png]`` (needs
the dev extra and Debian's chromium: ``make browser``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

_HERE = Path(__file__).resolve().parent
# Keep tools/ off the import path (tools/csv.py would shadow the csv module).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from playwright.sync_api import sync_playwright  # noqa: E402

from harness.browser import launch_chromium, wait_until  # noqa: E402
from harness.gallery import write_gallery  # noqa: E402
from mrecord.serve.server.run import ServerThread  # noqa: E402


def main() -> None:
    """Serve a gallery dataset, open the page in headless Chromium, save a screenshot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/serve_screenshot.png"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        first = write_gallery(Path(tmp) / "gallery.mrecord", rows=400, shards=4)
        with ServerThread({"gallery": first}) as server, sync_playwright() as pw:
            browser = launch_chromium(pw)
            page = browser.new_page(viewport={"width": 1360, "height": 1240})
            page.goto(server.url + "/#gallery")
            page.wait_for_selector("#rows-table img.thumb")
            page.wait_for_selector("#histogram svg")
            wait_until(
                page,
                "() => [...document.querySelectorAll('#rows-table img.thumb')]"
                ".every(i => i.complete && i.naturalWidth > 0)",
            )
            wait_until(page, "() => document.querySelector('#verify').textContent.includes('✓')")
            page.screenshot(path=str(args.out))
            browser.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
