"""``shuffle_quality`` (``mrecord shuffle-report``) measures long orders a chunk at a time.

Each metric made whole-order temporaries (8 bytes a position each, several at once), the
epoch correlation kept two whole orders and built its positions in 8-byte ints, the label
codes came from a sort of every label, and an order was materialized with its keyed
permutation's temporaries (~45 bytes an id): 8M rows, GLOBAL and BLOCK, peaked at 740 MB
traced (859 MB resident for the five default modes).
"""

from __future__ import annotations

import numpy as np
import pytest

from mrecord.sampling.order import PermutationOrder
from mrecord.sampling.quality import _label_codes, shuffle_quality
from tests.tracing import traced_peak

ROWS = 2_000_000


def test_a_report_of_two_million_rows_holds_a_few_bytes_a_row() -> None:
    labels = (np.arange(ROWS) // (ROWS // 1000)).astype(np.int32)  # label-sorted
    report, peak = traced_peak(
        lambda: shuffle_quality(
            [ROWS // 4] * 4, labels=labels, batch_size=32, epochs=3, modes=["global", "block"]
        )
    )
    # 185 MB, then 79 MB (orders in 8-byte ids, codes in 4 bytes, ~50 MB of temporaries
    # for chunks of 1M positions); now 52: the orders' positions (4 bytes a row, two
    # epochs), an order in 4-byte ids and codes in 2 stay
    assert peak < 64 << 20, f"the report held {peak >> 20} MB"
    (global_,) = [m for m in report.modes if m.mode == "global"]
    assert global_.values["displacement"][0] == pytest.approx(1 / 3, abs=0.01)
    assert all(abs(c) < 0.01 for c in global_.values["epoch_corr"])
    assert global_.values["label_entropy"][0] == pytest.approx(
        report.uniform["label_entropy"], rel=0.01
    )


@pytest.mark.parametrize(
    "labels",
    [
        np.array([5, -3, 5, 7, -3, 100, 7], dtype=np.int64),
        np.array([True, False, True]),
        np.array([3, 3, 3], dtype=np.uint8),
        np.array([2**40, 1, 2**40]),  # too wide a span to count: sorted
        np.array(["b", "a", "b"]),
    ],
)
def test_label_codes_are_those_of_a_sort(labels: np.ndarray) -> None:
    codes, counts = _label_codes(labels, labels.size)
    _, want_codes, want_counts = np.unique(labels, return_inverse=True, return_counts=True)
    assert codes is not None
    assert codes.tolist() == want_codes.reshape(-1).tolist()
    assert counts.tolist() == want_counts.tolist()


def test_a_long_order_materializes_in_chunks_to_the_same_ids() -> None:
    order = PermutationOrder(2_500_000, 12345)
    ids, peak = traced_peak(order.to_array)
    assert np.array_equal(ids, order.take(np.arange(len(order))))
    assert np.array_equal(np.sort(ids), np.arange(len(order)))
    assert peak < 48 << 20, f"materializing 2.5M ids held {peak >> 20} MB"  # 20 MB of ids
