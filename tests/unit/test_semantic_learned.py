"""The learned verifier (embedq/semantic/learned.py): its features read the rules' slots
one by one, its fit is deterministic, and the shipped weights load from JSON and score
the same row the same way every time. The span embedder is the hashing encoder (see
test_semantic_verify.py); the real model's figures are `embedq bench threshold --learned`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from embedq.bench import threshold
from embedq.bench.learned import operating_point, out_of_fold
from embedq.config import Settings
from embedq.errors import InvalidInput
from embedq.semantic.learned import FEATURES, SLOT_FEATURES, WEIGHTS, Learned, features, fit, load
from tests.unit.test_semantic_verify import ONE_SLOT_EDITS, VERIFIER


@pytest.mark.parametrize(("asked", "stored", "slot"), [
    *ONE_SLOT_EDITS,
    ("how do I restart a pod", "how do I restart every pod", "scope"),
])
def test_the_slot_a_rule_refuses_on_is_a_feature_set_to_one(asked: str, stored: str,
                                                             slot: str) -> None:
    conflict = VERIFIER.conflict(asked, stored)
    assert conflict is not None and conflict.slot == slot
    row = features(asked, stored, 0.9, VERIFIER)
    assert row[FEATURES.index(slot)] == 1.0
    assert VERIFIER.slots(asked, stored)[slot]


def test_a_pair_the_rules_pass_has_no_slot_feature_set() -> None:
    asked, stored = "How do I Reset my password?", "how can I reset my password"
    assert VERIFIER.conflict(asked, stored) is None
    row = features(asked, stored, 0.95, VERIFIER)
    assert [row[FEATURES.index(s)] for s in SLOT_FEATURES] == [0.0] * len(SLOT_FEATURES)
    assert row[FEATURES.index("score")] == 0.95
    assert row[FEATURES.index("weakest")] == 1.0  # every content word is on both sides


def _toy() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_], list[str]]:
    rng = np.random.default_rng(7)
    rows = rng.normal(size=(120, len(FEATURES)))
    labels = rows[:, 0] - 2 * rows[:, 1] > 0
    return rows, labels, [f"d{i % 4}" for i in range(120)]


def test_the_fit_is_deterministic_and_separates_what_it_can() -> None:
    rows, labels, _ = _toy()
    first, second = fit(rows, labels), fit(rows, labels)
    for a, b in zip(first[:3], second[:3], strict=True):
        assert np.array_equal(a, b)
    assert first[3] == second[3]
    mean, scale, weights, bias = first
    model = Learned(FEATURES, tuple(map(float, mean)), tuple(map(float, scale)),
                    tuple(map(float, weights)), bias, threshold=0.5)
    assert np.mean((model.probabilities(rows) >= 0.5) == labels) > 0.95


def test_the_operating_point_serves_no_near_miss_of_the_out_of_fold_scores() -> None:
    rows, labels, groups = _toy()
    oof = out_of_fold(rows, labels, groups)
    point = operating_point(oof, labels)
    assert not np.any(oof[~labels] >= point)
    assert point == round(point, 6)
    assert np.any(oof[labels] >= point)


def test_the_shipped_weights_load_from_json_and_score_reproducibly() -> None:
    model = load()
    assert model.features == FEATURES and 0.0 < model.threshold <= 1.0
    assert model.model == Settings.from_env({}).model.model  # the cosine feature's model
    row = features("how do I reset my password", "how can I reset my password", 0.93,
                   VERIFIER)
    p = model.probability(row)
    assert p == model.probability(row.copy())
    z = (row - np.array(model.mean)) / np.array(model.scale) @ np.array(model.weights)
    assert p == pytest.approx(1 / (1 + np.exp(-(z + model.bias))), rel=1e-12)
    assert Learned.from_json(json.loads(json.dumps(model.to_json()))) == model


def test_weights_for_other_features_or_damaged_ones_say_to_retrain(tmp_path: Path) -> None:
    data = json.loads(WEIGHTS.read_text(encoding="utf-8"))
    other = tmp_path / "other.json"
    other.write_text(json.dumps(dict(data, features=data["features"][:-1])))
    with pytest.raises(InvalidInput, match="--train-learned"):
        load(other)
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps(dict(data, scale=[0.0] * len(FEATURES))))
    with pytest.raises(InvalidInput, match="damaged"):
        load(damaged)
    with pytest.raises(InvalidInput, match="cannot read"):
        load(tmp_path / "absent.json")


@pytest.mark.parametrize(("options", "says"), [
    ({"train_learned": True}, "--train-learned goes with --learned"),
    ({"learned": "", "lodo": ""}, "pass one of them"),
])
def test_bench_threshold_refuses_learned_options_that_do_not_go_together(
        options: dict[str, object], says: str) -> None:
    args = argparse.Namespace(**{"pairs_file": None, "heldout_file": None, "lodo": None,
                                 "learned": None, "train_learned": False, "json": True,
                                 **options})
    with pytest.raises(InvalidInput, match=says):
        threshold.run(args)
