"""A namespace's trust score under its error budget, on the real model (embedded): a
rewording the verifier refuses on its content slot ("attach" for "upload") is served once
the namespace trusts its score, `explain` and `stats` say so, a wrong verdict on such a hit
raises the trust score just past it (the budget's rule, on those verdicts alone) and
leaves the threshold where it was, and a policy that cannot work is refused."""

from __future__ import annotations

from typing import Any

import pytest

from embedq.errors import InvalidInput
from embedq.semantic.budget import just_above

pytestmark = [pytest.mark.integration, pytest.mark.model]

# Two rewordings of stored questions that the verifier's content slot refuses (a verb the
# model reads as another), scoring about 0.93 each, the first above the second.
UPLOAD = ("how do I upload photos of the damage to my claim",
          "how can I attach photos of the damage to my claim")
ROLL_BACK = ("how do I roll back a deployment to the previous version",
             "how do I revert a deployment to the previous version")


def _checks(result: Any) -> list[tuple[str, str]]:
    return [(c.name, c.result) for c in result.considered[0].checks]


def test_a_trust_score_serves_what_the_verifier_refuses_until_feedback_raises_it(
        model_client: Any, salt: str) -> None:
    ns = f"trust-{salt}"
    for stored, _ in (UPLOAD, ROLL_BACK):
        model_client.cache_put(ns, stored, {"answer": stored})
    refused = model_client.cache_lookup(ns, UPLOAD[1], explain=True)
    assert not refused.hit and refused.considered[0].refused == "verifier"
    score = refused.considered[0].score
    other = model_client.cache_lookup(ns, ROLL_BACK[1], explain=True).considered[0].score
    assert 0.9 <= other < score  # what the rest of the test relies on

    configured = model_client.cache_configure(ns, max_false_hit_rate=0.02, trust_score=0.9)
    assert (configured["trust_score"], configured["base_trust_score"]) == (0.9, 0.9)
    served = model_client.cache_lookup(ns, UPLOAD[1], explain=True)
    assert served.hit and served.matches[0].query == UPLOAD[0]
    assert ("content", "fail") in _checks(served) and ("trust", "pass") in _checks(served)
    assert served.considered[0].refused is None
    assert "'attach' vs 'upload'" in (served.considered[0].reason or "")
    assert model_client.cache_lookup(ns, ROLL_BACK[1]).hit
    assert model_client.cache_stats(ns)["served"]["over_trust"] == 2

    hit_id = served.matches[0].hit_id
    judged = model_client.cache_feedback(ns, hit_id, False)
    # The trust score goes just past the wrong hit; the threshold, which only hits that
    # passed every check move, stays at its base.
    assert judged["trust_score"] == pytest.approx(just_above(score))
    assert judged["threshold"] == judged["base_threshold"]
    again = model_client.cache_lookup(ns, ROLL_BACK[1], explain=True)
    assert not again.hit and again.considered[0].refused == "verifier"
    assert _checks(again)[-2:] == [("content", "fail"), ("trust", "fail")]
    stats = model_client.cache_stats(ns)
    assert stats["trust_score"] == pytest.approx(just_above(score))
    assert stats["feedback"] == {"correct": 0, "wrong": 1}

    # Configuring the budget again keeps the evidence: the score stays raised; without a
    # trust score the verifier refuses as by default.
    kept = model_client.cache_configure(ns, max_false_hit_rate=0.02, trust_score=0.9)
    assert kept["trust_score"] == pytest.approx(just_above(score))
    assert model_client.cache_configure(ns, max_false_hit_rate=0.02)["trust_score"] is None


@pytest.mark.parametrize(("options", "says"), [
    ({"trust_score": 0.9}, "trust_score 0.9 needs max_false_hit_rate"),
    ({"max_false_hit_rate": 0.02, "trust_score": 1.5}, "trust_score 1.5 is outside [-1, 1]"),
    ({"max_false_hit_rate": 0.02, "trust_score": "high"}, "trust_score 'high' is outside"),
    ({"max_false_hit_rate": 0.02, "trust_score": True}, "trust_score True is outside"),
])
def test_a_trust_score_that_cannot_work_is_refused(model_client: Any, salt: str,
                                                   options: dict[str, Any], says: str) -> None:
    ns = f"trust-bad-{salt}"
    with pytest.raises(InvalidInput, match=None) as refused:
        model_client.cache_configure(ns, **options)
    assert says in str(refused.value)
    assert model_client.cache_stats(ns)["base_trust_score"] is None


def test_the_bench_serves_over_the_trust_score_as_the_cache_does(model_client: Any,
                                                                 salt: str) -> None:
    # `embedq bench threshold --lodo`'s trust table (bench/trust.py) counts a pair as
    # served where the cache serves it: one namespace per stored query, under a budget
    # no verdict moves and a trust score of 0.9, every query looked up once.
    from embedq.bench.threshold import DOMAINS, load_pairs, score_pairs
    from embedq.bench.trust import served

    pairs = [p for p in load_pairs(DOMAINS) if p.domain in ("kubernetes_docker", "payroll")]
    stored = sorted({p.stored for p in pairs})
    for n, text in enumerate(stored):
        model_client.cache_configure(f"bench-trust-{salt}-{n}", max_false_hit_rate=0.5,
                                     trust_score=0.9)
        model_client.cache_put(f"bench-trust-{salt}-{n}", text, n)
    threshold = model_client.semantic.settings.semantic.threshold
    scored = score_pairs(pairs, model_client.embed, model_client.semantic.verifier)
    over = 0
    for s in scored:
        expected, via_trust = served(s, threshold, 0.9)
        got = model_client.cache_lookup(f"bench-trust-{salt}-{stored.index(s.pair.stored)}",
                                        s.pair.query)
        assert got.hit == expected, (s.pair, s.score, s.conflict)
        over += via_trust
    assert over > 0  # the subset holds pairs served only over the trust score
