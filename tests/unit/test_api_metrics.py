"""Cluster-wide histograms: workers observe, any process reads the same buckets back
(the in-process and the Redis store, one body)."""

from __future__ import annotations

from embedq.coordination.store import HISTOGRAMS, BatchRecord, HotStore, bucket_index


def test_bucket_bounds_are_inclusive_and_overflow_goes_to_inf() -> None:
    bounds = HISTOGRAMS["batch_texts"]
    assert bucket_index("batch_texts", 1) == 0
    assert bucket_index("batch_texts", 3) == 2  # the bucket le=4
    assert bucket_index("batch_texts", bounds[-1] * 10) == len(bounds)


def test_observations_accumulate_per_bucket_with_sum_and_count(store: HotStore) -> None:
    assert store.histograms() == {}
    store.record_batch(BatchRecord(observations=[{"batch_texts": 3, "encode_seconds": 0.02}]))
    store.record_batch(BatchRecord(observations=[{"batch_texts": 64}]))
    store.record_batch(BatchRecord(observations=[{"batch_texts": 5000}]))
    snaps = store.histograms()
    texts = snaps["batch_texts"]
    assert texts.count == 3 and texts.total == 5067
    assert len(texts.buckets) == len(texts.bounds) + 1
    assert texts.buckets[bucket_index("batch_texts", 3)] == 1
    assert texts.buckets[bucket_index("batch_texts", 64)] == 1
    assert texts.buckets[-1] == 1
    assert snaps["encode_seconds"].count == 1
    assert "batch_tokens" not in snaps
