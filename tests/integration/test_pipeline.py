"""The core pipeline on real Redis, Postgres and `embedq worker` processes."""

from __future__ import annotations

import hashlib
import multiprocessing as mp
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select

from embedq.encoders.hashing import HashingEncoder
from embedq.errors import InvalidVector
from embedq.models import Embedding
from embedq.service import EmbeddingService
from tests import support
from tests.conftest import Cluster

pytestmark = pytest.mark.integration


def expected(text: str) -> np.ndarray:
    raw = HashingEncoder().encode([text])[0]
    return raw / np.linalg.norm(raw)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_vectors_come_back_in_input_order(cluster: Cluster, salt: str) -> None:
    service = cluster.service()
    texts = [f"{salt} alpha", f"{salt} beta", f"{salt} alpha", f"{salt} gamma"]
    vectors = service.embed(texts).vectors()
    assert len(vectors) == 4
    for text, vec in zip(texts, vectors, strict=True):
        np.testing.assert_allclose(vec, expected(text), rtol=1e-5, atol=1e-6)


def test_second_request_is_answered_from_cache(cluster: Cluster, salt: str) -> None:
    service = cluster.service()
    texts = [f"{salt} cached {i}" for i in range(5)]
    first = service.embed(texts)
    assert [o.source for o in first.outcomes] == ["computed"] * 5
    second = service.embed(texts)
    assert [o.source for o in second.outcomes] == ["local"] * 5  # this process's tier
    other = cluster.service(local_tier_mb=0)  # a process without one asks Redis
    assert [o.source for o in other.embed(texts).outcomes] == ["hot"] * 5
    service.hot.client.delete(*[f"embedq:vec:{fp}" for fp in _fps(service, texts)])
    third = other.embed(texts)
    assert [o.source for o in third.outcomes] == ["durable"] * 5
    passes = cluster.passes()
    assert all(passes[digest(t)] == 1 for t in texts)


def _fps(service: EmbeddingService, texts: list[str]) -> list[str]:
    from embedq.fingerprint import fingerprint

    spec = service.spec()
    return [fingerprint(spec, t) for t in texts]


def _producer(env: dict[str, str], texts: list[str], n: int, out: Any) -> None:
    settings = support.settings_from(env)
    service = EmbeddingService(settings)
    rng = np.random.default_rng()

    def one(_: int) -> list[tuple[str, list[float]]]:
        pick = [texts[int(i)] for i in rng.integers(0, len(texts), size=3)]
        vecs = service.embed(pick).vectors()
        return [(t, v.tolist()) for t, v in zip(pick, vecs, strict=True)]

    with ThreadPoolExecutor(16) as pool:
        results = [r for batch in pool.map(one, range(n)) for r in batch]
    out.put(results)


def test_concurrent_producers_compute_each_text_once(cluster: Cluster, salt: str) -> None:
    texts = [f"{salt} race text {i}" for i in range(10)]
    service = cluster.service()
    before = service.stats()["encoded"]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_producer, args=(cluster.env, texts, 200, out))
             for _ in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert service.stats()["encoded"] - before == 10
    assert sum(len(r) for r in results) == 4 * 200 * 3
    for batch in results:
        for text, vec in batch:
            np.testing.assert_allclose(vec, expected(text), rtol=1e-5, atol=1e-6)
    passes = cluster.passes()
    assert [passes.get(digest(t), 0) for t in texts] == [1] * 10


def test_nan_text_fails_alone_and_is_never_stored(cluster: Cluster, salt: str) -> None:
    service = cluster.service()
    texts = [f"{salt} fine {i}" for i in range(8)]
    texts.insert(3, f"{salt} broken [[nan]]")
    result = service.embed(texts)
    errors = [o.error for o in result.outcomes]
    assert isinstance(errors[3], InvalidVector)
    assert "NaN" in str(errors[3])
    assert all(e is None for i, e in enumerate(errors) if i != 3)
    bad_fp = _fps(service, [texts[3]])[0]
    with service.db.session() as s:
        assert s.scalar(select(func.count()).where(Embedding.fingerprint == bad_fp)) == 0
    assert service.hot.vectors([bad_fp]) == [None]


def test_dimensions_and_normalize_change_the_vector(cluster: Cluster, salt: str) -> None:
    service = cluster.service()
    text = f"{salt} shape"
    full = service.embed([text]).vectors()[0]
    short = service.embed([text], dimensions=64).vectors()[0]
    raw = service.embed([text], normalize=False).vectors()[0]
    assert full.shape == (384,) and short.shape == (64,)
    assert np.isclose(np.linalg.norm(short), 1.0, atol=1e-5)
    np.testing.assert_allclose(short, full[:64] / np.linalg.norm(full[:64]), rtol=1e-5)
    assert not np.isclose(np.linalg.norm(raw), 1.0)
    specs = [service.spec(), service.spec(dimensions=64), service.spec(normalize=False)]
    from embedq.fingerprint import fingerprint

    assert len({fingerprint(spec, text) for spec in specs}) == 3


def test_repeated_texts_are_computed_and_stored_once(cluster: Cluster, salt: str) -> None:
    service = cluster.service()
    texts = [f"{salt} once {i % 7}" for i in range(50)]
    service.embed(texts)
    fps = set(_fps(service, texts))
    with service.db.session() as s:
        stored = set(s.scalars(select(Embedding.fingerprint).where(
            Embedding.fingerprint.in_(fps))))
    assert stored == fps
    # The primary key keeps rows unique whatever happens; the ledger of forward passes
    # is what a duplicate computation would show.
    passes = cluster.passes()
    assert sorted(passes.get(digest(t), 0) for t in set(texts)) == [1] * 7
