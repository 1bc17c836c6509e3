"""`embedq bench threshold --learned`'s path with the REAL default model, on a small subset
of tests/data/semantic_pairs.domains.jsonl (three domains, a few stored queries each):
each domain is decided by a fit and an operating point made without its pairs, and the
shipped weights score real pairs the same way twice."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from embedq.bench.learned import (
    VARIANTS,
    _eligible,
    _labels,
    feature_rows,
    fitted,
    learned_report,
    memo,
)
from embedq.bench.threshold import DOMAINS, FRESH, load_pairs, score_pairs
from embedq.semantic.learned import features, load
from embedq.semantic.verify import Verifier

pytestmark = [pytest.mark.integration, pytest.mark.model]

SUBSET = ("kubernetes_docker", "pets", "tenancy_law")


@pytest.fixture(scope="module")
def subset() -> list[Any]:
    pairs = [p for p in load_pairs(DOMAINS) if p.domain in SUBSET]
    keep = {s for d in SUBSET for s in sorted({p.stored for p in pairs if p.domain == d})[:4]}
    return [p for p in pairs if p.stored in keep]


def test_each_domain_is_decided_by_a_fit_made_without_it(model_client: Any,
                                                         subset: list[Any]) -> None:
    fresh = load_pairs(FRESH)[:10]
    default = model_client.semantic.settings.semantic.threshold
    report = learned_report(subset, {"fresh": fresh}, model_client.embed, default=default)
    embed = memo(model_client.embed)
    verifier = Verifier(embed)
    scored = score_pairs(subset, embed, verifier)
    rows = feature_rows(scored, verifier)
    labels = _labels(scored)
    groups = np.array([s.pair.domain for s in scored])
    for variant in VARIANTS:
        eligible = _eligible(scored, default, variant)
        found = served = 0
        for row in report[variant]["per_domain"]:
            train = eligible & (groups != row["domain"])
            model = fitted(rows[train], labels[train], list(groups[train]))
            assert row["operating_point"] == model.threshold
            inside = groups == row["domain"]
            hit = eligible[inside] & (model.probabilities(rows[inside]) >= model.threshold)
            assert row["found"]["k"] == int(np.sum(hit & labels[inside]))
            assert row["served"]["k"] == int(np.sum(hit & ~labels[inside]))
            found += row["found"]["k"]
            served += row["served"]["k"]
        lodo = report[variant]["lodo"]
        assert (lodo["paraphrases_found"]["k"], lodo["near_misses_served"]["k"]) == (
            found, served)
        assert report[variant]["heldout"]["fresh"]["paraphrases_found"]["n"] == sum(
            p.label == "paraphrase" for p in fresh)
    assert report["rules"]["lodo"]["paraphrases_found"]["n"] == sum(
        p.label == "paraphrase" for p in subset)


def test_the_rules_column_is_what_lodo_reports(model_client: Any, subset: list[Any]) -> None:
    # the model's whole words reach the rules as `--lodo` scores them (typos read so)
    from embedq.bench.lodo import lodo_report

    known = model_client.semantic.verifier.known
    default = model_client.semantic.settings.semantic.threshold
    report = learned_report(subset, {}, model_client.embed, default=default, known=known)
    assert report["rules"]["lodo"] == lodo_report(subset, {}, model_client.embed, default,
                                                  known)["lodo"]


def test_the_shipped_weights_score_real_pairs_reproducibly(model_client: Any) -> None:
    model = load()
    verifier = Verifier(memo(model_client.embed))
    pairs = load_pairs(FRESH)[:6]
    scored = score_pairs(pairs, verifier.embed, verifier)
    once = [model.probability(features(s.pair.query, s.pair.stored, s.score, verifier))
            for s in scored]
    again = [model.probability(features(s.pair.query, s.pair.stored, s.score, verifier))
             for s in scored]
    assert once == again
    assert all(0.0 <= p <= 1.0 for p in once)
