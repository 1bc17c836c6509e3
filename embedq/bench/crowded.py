"""One namespace holding many entries: what a lookup returns when every stored query of a
domain sits in one namespace, as in a real cache, rather than one pair at a time.

The pair figures (threshold.py, lodo.py) ask whether a query hits the one entry it is
labelled against. A cache holds many: a near-miss refused by its own stored query may
still hit a neighbour, and a paraphrase refused by its own may be served another's
answer. `crowded` puts each file's distinct stored queries in one namespace per domain
(one for a file without domains), looks up every query as SemanticCache.lookup does (the
FETCH best candidates by cosine, the first at or above the threshold that the guard and
the verifier pass), and sorts what comes back:

  true hit        the entry is the query's labelled paraphrase (or the same text)
  near-miss       the entry is labelled a near-miss of the query
  other entry     a hit on an entry no label relates to the query: counted as a false hit
                  (the pairs were written one stored query at a time, so an unlabelled
                  hit is almost always another question; each is listed to be read)
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from embedq.bench.threshold import Embed, Pair, Scored, _mode, as_meant, is_hit
from embedq.semantic.guard import contrasting
from embedq.semantic.index import unit_rows
from embedq.semantic.meant import unreadable
from embedq.semantic.verify import Verifier

FETCH = 5  # the candidates a lookup with k=1 reads (SemanticCache._candidates: k + 4)


def crowded(pairs: list[Pair], embed: Embed, verifier: Verifier,
            thresholds: tuple[float, ...]) -> dict[str, Any]:
    """Per threshold: queries looked up, true hits, near-misses served, hits on another
    entry (each listed with its score), and misses."""
    texts = sorted({t for p in pairs for t in (p.stored, p.query)})
    rows = unit_rows(np.stack(list(embed(texts))).astype(np.float32))
    at = {t: rows[i] for i, t in enumerate(texts)}
    spaces: dict[str, set[str]] = defaultdict(set)
    for p in pairs:
        spaces[p.domain].add(p.stored)
    label = {(p.query, p.stored): p.label for p in pairs}
    asked = sorted({(p.domain, p.query) for p in pairs})
    guard, band = _mode("verifier_on")
    judged: dict[tuple[str, str], Scored] = {}
    out: dict[str, Any] = {}
    for threshold in thresholds:
        counts = {"queries": len(asked), "true_hits": 0, "near_misses_served": 0,
                  "other_entry_hits": 0, "misses": 0}
        others = []
        for domain, query in asked:
            hit = _lookup(query, spaces[domain], at, threshold, verifier, judged,
                          guard, band, embed)
            said = None if hit is None else label.get((query, hit.pair.stored))
            if hit is None:
                counts["misses"] += 1
            elif hit.pair.stored == query or said == "paraphrase":
                counts["true_hits"] += 1
            elif said == "near_miss":
                counts["near_misses_served"] += 1
            else:
                counts["other_entry_hits"] += 1
                others.append({"query": query, "entry": hit.pair.stored,
                               "score": round(hit.score, 4)})
        out[f"{threshold:.2f}"] = {**counts, "other_entries": others}
    return out


def _lookup(query: str, stored: set[str], at: dict[str, Any], threshold: float,
            verifier: Verifier, judged: dict[tuple[str, str], Scored], guard: bool,
            band: float | None, embed: Embed) -> Scored | None:
    """The entry a lookup of `query` returns in a namespace holding `stored`, or None:
    the FETCH nearest, each scored again on the query as meant toward it (lookup.mend)."""
    ranked = sorted((-float(at[query] @ at[s]), s) for s in stored)[:FETCH]
    if unreadable(query, verifier.known):
        ranked = sorted((-as_meant(query, s, -n, at, embed, verifier.known), s)
                        for n, s in ranked)
    for negated, entry in ranked:
        score = -negated
        if score < threshold:
            return None
        if (query, entry) not in judged:
            judged[query, entry] = Scored(
                Pair(entry, query, "near_miss", "entity"), score,
                contrasting(query, entry, verifier.known), verifier.conflict(query, entry))
        if is_hit(judged[query, entry], threshold, guard, band):
            return judged[query, entry]
    return None
