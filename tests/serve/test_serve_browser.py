"""The `mrecord serve` page in a real browser: headless Chromium (Debian's, driven by Playwright).

``make test`` installs chromium (``make browser``); the screenshot is saved under the test's
tmp dir as an artifact (docs/serve_screenshot.png comes from tools/serve_screenshot.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.browser import wait_until
from harness.gallery import write_gallery
from mrecord import DatasetReader
from mrecord.serve.server.run import ServerThread

pytestmark = pytest.mark.browser

ROWS = 90


@pytest.fixture(scope="module")
def gallery(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gallery(tmp_path_factory.mktemp("gallery") / "gallery.mrecord", ROWS, shards=2)


@pytest.fixture(scope="module")
def page(gallery: Path, browser: Any) -> Iterator[Any]:
    with ServerThread({"gallery": gallery}) as server:
        tab = browser.new_page(viewport={"width": 1360, "height": 1000})
        errors: list[str] = []
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        tab.goto(server.url + "/")
        tab.errors = errors
        yield tab
        tab.close()


def _ids(tab: Any) -> list[int]:
    ids = tab.eval_on_selector_all("#rows-table tbody tr", "rs => rs.map(r => r.dataset.id)")
    return [int(x) for x in ids]


def test_page_lists_the_dataset_and_its_schema(page: Any) -> None:
    page.wait_for_selector(".ds-item[data-name=gallery]")
    assert "gallery" in page.inner_text("#datasets")
    assert f"{ROWS} rows" in page.inner_text("#datasets")
    page.wait_for_selector("#schema-table tbody tr")
    schema = page.inner_text("#schema-table")
    for column in ("png", "pixels", "label", "name", "score"):
        assert column in schema
    assert page.inner_text("#shard-table").count("gallery.mrecord") == 2
    wait_until(page, "() => document.querySelector('#verify').textContent.includes('verified')")


def test_rows_page_and_thumbnails_load(page: Any) -> None:
    page.wait_for_selector("#rows-table tbody tr")
    assert _ids(page) == list(range(25))
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")  # thumbnails are lazy
    loaded = wait_until(
        page,
        "() => { const imgs = [...document.querySelectorAll('#rows-table img.thumb')];"
        " return imgs.length > 0 && imgs.every(i => i.complete && i.naturalWidth > 0)"
        " && imgs.length; }",
    )
    assert loaded == 2 * 25  # png and pixels, every row
    page.click("#next-page")
    wait_until(page, "() => document.querySelector('#rows-table tbody tr').dataset.id === '25'")
    assert _ids(page) == list(range(25, 50))
    page.click("#prev-page")
    wait_until(page, "() => document.querySelector('#rows-table tbody tr').dataset.id === '0'")


def test_search_by_label_shows_only_that_label(page: Any, gallery: Path) -> None:
    with DatasetReader.open(gallery) as reader:
        labels = np.asarray(reader.read_rows(np.arange(ROWS), columns=["label"]).columns["label"])
    want = np.flatnonzero(labels == 3).tolist()[:25]
    page.select_option("#search-field", "label")
    page.fill("#search-value", "3")
    page.click("#search-form button[type=submit]")
    wait_until(page, "() => document.querySelector('#page-info').textContent.includes('label = 3')")
    assert _ids(page) == want


def test_histogram_row_detail_and_screenshot(page: Any, tmp_path: Path) -> None:
    page.wait_for_selector("#histogram svg rect.bar")
    bars = page.eval_on_selector_all("#histogram rect.bar", "bs => bs.map(b => b.dataset.value)")
    assert sorted(int(b) for b in bars) == list(range(10))
    first = page.query_selector("#rows-table tbody tr")
    first.click()
    page.wait_for_selector("#detail:not(.hidden) .detail-row")
    assert "row" in page.inner_text("#detail-title")
    wait_until(
        page,
        "() => { const i = document.querySelector('#detail img.big-thumb');"
        " return i && i.complete && i.naturalWidth > 0; }",
    )
    shot = tmp_path / "serve_page.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    page.keyboard.press("Escape")
    assert page.errors == []


def test_with_a_token_the_page_asks_for_it_then_works(gallery: Path, browser: Any) -> None:
    with ServerThread({"gallery": gallery}, token="s3cret") as server:
        tab = browser.new_page(viewport={"width": 1360, "height": 3000})
        try:
            tab.goto(server.url + "/")
            tab.wait_for_selector("#token-form:not(.hidden)")
            wait_until(tab, "() => document.querySelector('#datasets').innerText.includes('token')")
            tab.fill("#token-input", "s3cret")
            tab.click("#token-form button[type=submit]")
            tab.wait_for_selector(".ds-item[data-name=gallery]")
            tab.wait_for_selector("#rows-table img.thumb")
            loaded = wait_until(
                tab,
                "() => { const imgs = [...document.querySelectorAll('#rows-table img.thumb')];"
                " return imgs.length && imgs.every(i => i.complete && i.naturalWidth > 0)"
                " && imgs[0].src.startsWith('blob:'); }",
            )
            assert loaded
        finally:
            tab.close()
