"""The index contract, run on the exact fake and on FAISS (flat and IVF)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from embedq.semantic.guard import contrasting
from embedq.semantic.index import (
    ExactIndex,
    FaissIndex,
    IndexConfig,
    VectorIndex,
    build_index,
    unit_rows,
    wants_rebuild,
)

DIM = 32
CONFIGS = {
    "exact": IndexConfig(kind="exact"),
    "flat": IndexConfig(flat_max=10_000, use_gpu=False),
    "ivf": IndexConfig(flat_max=100, ivf_list_size=16, nprobe=64, use_gpu=False),
}


@pytest.fixture(params=list(CONFIGS))
def config(request: pytest.FixtureRequest) -> IndexConfig:
    return CONFIGS[str(request.param)]


def _data(n: int, seed: int = 0) -> np.ndarray:
    return unit_rows(np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32))


def _index(config: IndexConfig, n: int = 500) -> VectorIndex:
    return build_index(np.arange(1000, 1000 + n, dtype=np.int64), _data(n), DIM, config)


def test_kind_follows_size(config: IndexConfig) -> None:
    kind = _index(config).kind
    assert kind == {"exact": "exact", "flat": "flat", "ivf": "ivf"}[
        next(k for k, c in CONFIGS.items() if c == config)]


def test_each_vector_finds_itself_with_cosine_one(config: IndexConfig) -> None:
    index, data = _index(config), _data(500)
    for row in (0, 17, 499):
        [(found, score)] = index.search(data[row] * 3.0, 1)  # scale does not matter
        assert found == 1000 + row
        assert score == pytest.approx(1.0, abs=1e-5)


def test_scores_are_cosines_best_first(config: IndexConfig) -> None:
    index, data = _index(config), _data(500)
    hits = index.search(data[3], 20)
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(-1.0 <= s <= 1.0 for s in scores)
    assert index.search(-data[3], 1)[0][1] < 0.9  # its own opposite is far from it


def test_tombstones_never_come_back_and_compaction_keeps_the_rest(config: IndexConfig) -> None:
    index, data = _index(config), _data(500)
    index.remove([1000, 1001, 1002])
    assert len(index) == 497
    assert all(i not in {1000, 1001, 1002} for i, _ in index.search(data[0], 50))
    assert index.compact() == 3
    assert (len(index), index.stored) == (497, 497)
    assert index.search(data[10], 1)[0][0] == 1010
    ids, vectors = index.contents()
    assert sorted(ids.tolist()) == list(range(1003, 1500))
    np.testing.assert_allclose(vectors[np.argsort(ids)], data[3:], atol=1e-6)


def test_empty_index_answers_nothing(config: IndexConfig) -> None:
    index = build_index(np.zeros(0, dtype=np.int64), np.zeros((0, DIM), np.float32), DIM,
                        config)
    assert index.search(_data(1)[0], 3) == []
    index.add([7], _data(1))
    assert index.search(_data(1)[0], 3)[0][0] == 7


def test_snapshot_round_trip(config: IndexConfig, tmp_path: Path) -> None:
    index, data = _index(config), _data(500)
    index.remove([1004])
    path = tmp_path / "index.bin"
    index.save(path)  # type: ignore[attr-defined]
    if isinstance(index, ExactIndex):
        again: VectorIndex = ExactIndex.load(path, DIM)
    else:
        assert isinstance(index, FaissIndex)
        again = FaissIndex.load(path, index.kind, index.trained_for, config)
    for row in (5, 250):
        before, after = index.search(data[row], 3), again.search(data[row], 3)
        assert [i for i, _ in after] == [i for i, _ in before]
        assert [s for _, s in after] == pytest.approx([s for _, s in before], abs=1e-6)
    assert len(again) == 499


def test_flat_past_its_size_wants_ivf() -> None:
    config = IndexConfig(flat_max=50, use_gpu=False)
    flat = build_index(np.arange(40, dtype=np.int64), _data(40), DIM, config)
    assert not wants_rebuild(flat, config)
    flat.add(range(40, 60), _data(20, seed=1))
    assert wants_rebuild(flat, config)


@pytest.mark.parametrize(("asked", "stored", "refused"), [
    ("how do I enable two-factor authentication",
     "how do I disable two-factor authentication", True),
    ("how do I convert an integer to a string", "how do I convert a string to an integer", True),
    ("what is the function of money", "what is the function of a TV", True),
    ("how to create an account", "how do I open an account", False),
    ("How do I open an account?", "how do I open an account", False),
    ("merging two git branches", "how do I merge two branches in git", False),
    ("how do I merge branches", "how do I merge a branch", False),
])
def test_contrast_guard(asked: str, stored: str, refused: bool) -> None:
    assert contrasting(asked, stored) is refused
