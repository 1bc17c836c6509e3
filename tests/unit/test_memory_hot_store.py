"""MemoryHotStore drops expired keys that are never read again: an embedded `embedq serve`
must not grow forever with one-off vectors, claims and failures."""

from __future__ import annotations

import time

from embedq.coordination.memory import MemoryHotStore

SHORT_LIVED = 5000


def test_expired_keys_are_swept_without_being_read() -> None:
    store = MemoryHotStore()
    store.put_vectors({f"short-{i}": b"v" for i in range(SHORT_LIVED)}, ttl_s=1)
    store.claim([f"claim-{i}" for i in range(100)], "owner", ttl_ms=500)
    assert len(store) == SHORT_LIVED + 100
    live = peak = 0
    deadline = time.monotonic() + 10
    # Keep writing long-lived keys (as a busy server does) until the store holds only
    # those: sweeps ran after the short-lived keys expired. None of them is read meanwhile.
    while len(store) > live:
        assert time.monotonic() < deadline, f"still {len(store)} keys for {live} live ones"
        peak = max(peak, len(store))
        store.put_vectors({f"live-{live + i}": b"v" for i in range(50)}, ttl_s=3600)
        live += 50
        time.sleep(0.01)
    assert len(store) == live < peak, "the store shrank: expired keys went, live ones stayed"
    assert store.vectors(["live-0", f"live-{live - 1}"]) == [b"v", b"v"]


def test_a_sweep_keeps_live_keys() -> None:
    store = MemoryHotStore()
    store.put_vectors({f"k-{i}": b"v" for i in range(3 * MemoryHotStore.SWEEP_MIN_WRITES)},
                      ttl_s=3600)
    assert len(store) == 3 * MemoryHotStore.SWEEP_MIN_WRITES
    assert store.vectors(["k-0", f"k-{3 * MemoryHotStore.SWEEP_MIN_WRITES - 1}"]) == [
        b"v", b"v"]
