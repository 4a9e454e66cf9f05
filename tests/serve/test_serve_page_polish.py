"""The `mrecord serve` page, polished (issue 26, items 12 and 7) in headless Chromium: the
subtitle is the description's text, not its JSON; row ids and match numbers are told
apart; a short array is shown whole; a float32 at float32's precision; sizes in MiB as the
CLI prints them; class names on the histogram and in the table; at 420 px the dataset list
is a strip above the page and wide tables scroll in their panel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.browser import wait_until
from mrecord import FileWriter
from mrecord.serve.server.run import ServerThread

pytestmark = pytest.mark.browser

NAMES = ["cat", "dog", "emu"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("polish")
    desc = {"source": "unit test", "features": {"label": {"class_names": NAMES}}}
    with FileWriter(folder / "p.mrecord", shard_num=1) as writer:
        writer.add_schema(
            {
                "label": {"type": "int32"},
                "pair": {"type": "int32", "shape": [2]},
                "score": {"type": "float32"},
                "blob": {"type": "bytes"},
            },
            desc=json.dumps(desc),
        )
        writer.add_index(["label"])
        writer.write_raw_data(
            [
                {
                    "label": i % 3,
                    "pair": np.array([0, 1], np.int32),
                    "score": np.float32(0.1),
                    "blob": b"x" * 40_000,
                }
                for i in range(30)
            ]
        )
    return folder / "p.mrecord"


def open_page(browser: Any, url: str, width: int) -> Any:
    tab = browser.new_page(viewport={"width": width, "height": 800})
    tab.goto(url + "/")
    tab.wait_for_selector("#rows-table tbody tr")
    return tab


def test_page_text_is_polished(dataset: Path, browser: Any) -> None:
    with ServerThread({"p": dataset}) as server:
        tab = open_page(browser, server.url, 1360)
        assert tab.inner_text("#ds-desc") == "source: unit test"
        row = tab.inner_text("#rows-table tbody tr")
        assert "int32[2] [0, 1]" in row and "…" not in row.split("int32[2]")[1].split("]")[0]
        assert "0.1" in row and "0.10000000149" not in row
        assert "0 cat" in row.replace("\n", " ").replace("\t", " ")
        assert "39.1 KiB" in row  # binary units, as the CLI's
        assert "MiB" in tab.inner_text("#cards") and " MB" not in tab.inner_text("#cards")
        assert tab.inner_text("#page-info") == "row ids 0–24 of 30 rows"
        wait_until(tab, "() => document.querySelectorAll('#histogram text.tick').length === 3")
        ticks = tab.eval_on_selector_all("#histogram text.tick", "ts => ts.map(t => t.textContent)")
        assert ticks == NAMES
        tab.select_option("#search-field", "label")
        tab.fill("#search-value", "1")
        tab.click("#search-form button[type=submit]")
        wait_until(tab, "() => document.querySelector('#page-info').textContent.includes('= 1')")
        assert tab.inner_text("#page-info") == "label = 1: matches 1–10 of 10"
        tab.close()


def test_at_420_px_the_list_is_a_strip_and_tables_scroll(dataset: Path, browser: Any) -> None:
    with ServerThread({"p": dataset}) as server:
        tab = open_page(browser, server.url, 420)
        side = tab.eval_on_selector(".sidebar", "e => e.getBoundingClientRect().toJSON()")
        main = tab.eval_on_selector("main", "e => e.getBoundingClientRect().toJSON()")
        assert side["height"] < 120  # a strip, not half the screen
        assert main["width"] >= 400 and main["left"] < 10
        schema = tab.eval_on_selector(
            "#schema-table",
            "t => { const p = t.closest('.panel'); return [p.scrollWidth, p.clientWidth,"
            " getComputedStyle(p).overflowX]; }",
        )
        assert schema[0] <= schema[1] or schema[2] == "auto"  # fits, or scrolls: never clipped
        tab.close()
