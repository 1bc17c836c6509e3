"""What a semantic lookup returns, and why each candidate it weighed was kept or refused.

`SemanticCache.lookup` (service.py) finds candidates in the index and reads their rows;
this module judges them one by one:
  mend           each candidate scored again on the query as meant toward it (meant.py:
                 a typo or short form the model cannot read, written as the candidate's
                 word), keeping the better score;
  refusal        below the threshold, expired, refused by the contrast guard (guard.py)
                 or the verifier (verify.py), or not matching the metadata filter; under
                 a namespace's trust score (feedback.py), a candidate at or above it that
                 the verifier refuses only on a slot the model judges is served (TRUSTED);
  negative       marked wrong (feedback.py) for a query at least as close as the radius;
  within_bytes   the best matches whose JSON fits the lookup's byte limit.
`Match`, `Considered` and `LookupResult` are the answer (`explain` lists every candidate,
with the checks it passed in `checks`: a served match's say why it could be served).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from embedq.semantic import synonyms
from embedq.semantic.guard import contrast, words
from embedq.semantic.index import Hit, Matrix
from embedq.semantic.meant import meant, unreadable
from embedq.semantic.store import Entry
from embedq.semantic.verify import MODEL_CHECKS, MODEL_SLOTS, Check, Verifier
from embedq.semantic.vocabulary import reconcile

EXACT = 1.0
# `refusal`'s answer for a candidate served over a model-judged conflict (a trust score).
TRUSTED = "trusted"


@dataclass(frozen=True)
class Match:
    id: int
    score: float
    query: str
    payload: Any
    metadata: dict[str, Any]
    hit_id: str | None = None  # names this served hit in feedback

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Considered:
    """One candidate a lookup weighed (`explain`): its score and why it was refused.

    `refused` is None for a match, else one of below_threshold, guard, verifier, negative
    (the entry was marked wrong for a query this close), filter, expired (the entry's row
    is gone or past its ttl), beyond_k; `reason` says more. `checks` (explain) are the
    checks it went through in order, each passed or skipped (and why), the last one
    failed for a refused candidate: threshold, live, guard, the verifier's band and slots
    (verify.py), filter, negative."""

    id: int
    score: float
    query: str | None
    refused: str | None
    reason: str | None = None
    checks: list[Check] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LookupResult:
    hit: bool
    matches: list[Match]
    threshold: float
    truncated: bool = False  # matches past EMBEDQ_SEMANTIC_MAX_LOOKUP_BYTES were left off
    considered: list[Considered] | None = None  # with explain=True

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "hit": self.hit, "threshold": self.threshold,
            "matches": [m.to_json() for m in self.matches], "truncated": self.truncated}
        if self.considered is not None:
            out["considered"] = [c.to_json() for c in self.considered]
        return out


class Asked:
    """The asked query's vector, embedded on first use (an exact lookup may need none)."""

    def __init__(self, query: str, embed: Callable[[str], Matrix]) -> None:
        self.query = query
        self.embed = embed  # any text's unit row, in the query's space and for its caller
        self._vector: Matrix | None = None

    def vector(self) -> Matrix:
        if self._vector is None:
            self._vector = self.embed(self.query)
        return self._vector


def mend(asked: Asked, candidates: list[Hit], rows: dict[int, Entry], known: Collection[str],
         queries: Callable[[list[int]], dict[int, str]],
         entries: Callable[[list[int]], dict[int, Entry]]
         ) -> tuple[list[Hit], dict[int, Entry], dict[int, Check]]:
    """`candidates` with each scored again on the query as meant toward it (meant.py),
    keeping the better score, best first; their `rows` with those of the candidates the
    rewrite raised added (`entries`); and the check `explain` shows for each of them. The
    stored queries of the candidates without a row are read alone (`queries`: no
    payloads). A query whose words the model all knows (`known`) costs nothing."""
    odd = unreadable(asked.query, known) if candidates else []
    if not odd:
        return candidates, rows, {}
    stored = {i: e.query for i, e in rows.items()}
    stored |= queries([i for i, _ in candidates if i not in rows])
    scored: list[Hit] = []
    notes: dict[int, Check] = {}
    for entry_id, score in candidates:
        text = meant(asked.query, stored[entry_id], known, odd) if entry_id in stored else None
        if text is not None:
            again = float((asked.embed(text) @ asked.embed(stored[entry_id]).T).item())
            if again > score:
                notes[entry_id] = Check("meant", "pass", f"scored {again:.4f} as {text!r} "
                                                         f"({score:.4f} as asked)")
                score = again
        scored.append((entry_id, score))
    raised = [i for i in notes if i not in rows]
    return sorted(scored, key=lambda hit: -hit[1]), rows | entries(raised), notes


def refusal(query: str, entry: Entry | None, score: float, threshold: float,
            filter: dict[str, Any] | None, *, guard: bool, verifier: Verifier | None,
            trace: list[Check] | None = None,
            trust: float | None = None) -> tuple[str | None, str | None]:
    """(why a candidate is refused, detail), or (None, None) for a match, or (TRUSTED,
    the conflict) for a match served over a model-judged conflict at or above `trust` (a
    namespace's trust score, None: none). `guard`: the contrast guard is on
    (EMBEDQ_SEMANTIC_CONTRAST_GUARD); `verifier`: the verifier, if on. `trace` (explain)
    gets a Check for each check passed, skipped or failed, in order."""
    found = _refusal(query, entry, score, threshold, filter, guard, verifier, trace, trust)
    if trace is not None and found[0] in _FAILED_CHECK:
        trace.append(Check(_FAILED_CHECK[found[0]], "fail", found[1]))
    return found


# The check a refusal names; the verifier's failing slot is added by `_judged`.
_FAILED_CHECK = {"below_threshold": "threshold", "expired": "live", "guard": "guard",
                 "filter": "filter"}


def _refusal(query: str, entry: Entry | None, score: float, threshold: float,
             filter: dict[str, Any] | None, guard: bool, verifier: Verifier | None,
             trace: list[Check] | None, trust: float | None) -> tuple[str | None, str | None]:
    if score < threshold:
        return "below_threshold", f"score {score:.4f} < threshold {threshold:.4f}"
    if trace is not None:
        trace.append(Check("threshold", "pass",
                           f"score {score:.4f} >= threshold {threshold:.4f}"))
    if entry is None:
        return "expired", "the entry was deleted or is past its ttl"
    if trace is not None:
        trace.append(Check("live", "pass"))
    trusted = None
    if threshold < EXACT and entry.query != query:
        refused = _judged(query, entry.query, score, threshold, guard, verifier, trace, trust)
        if refused is not None and refused[0] != TRUSTED:
            return refused
        trusted = refused
    elif trace is not None:
        same = "the same text" if entry.query == query else "an exact-text lookup"
        trace += [Check("guard", "skipped", same), Check("verifier", "skipped", same)]
    if not matches_filter(entry, filter):
        return "filter", "the entry's metadata does not match the filter"
    if trace is not None:
        trace.append(Check("filter", "pass", None if filter else "no filter"))
    return trusted or (None, None)


def _judged(query: str, stored: str, score: float, threshold: float, guard: bool,
            verifier: Verifier | None, trace: list[Check] | None,
            trust: float | None) -> tuple[str, str] | None:
    """The contrast guard's or the verifier's refusal of a candidate that is another
    text, (TRUSTED, the conflict) where `trust` serves it over the verifier, or None."""
    if guard:
        why = contrast(query, stored, verifier.known if verifier is not None else frozenset())
        if why is not None:
            return "guard", why
    if trace is not None:
        trace.append(Check("guard", "pass", synonyms.note(*reconcile(words(query),
                                                                    words(stored))))
                     if guard else
                     Check("guard", "skipped", "EMBEDQ_SEMANTIC_CONTRAST_GUARD=false"))
    if verifier is None:
        if trace is not None:
            trace.append(Check("verifier", "skipped", "EMBEDQ_SEMANTIC_VERIFY=false"))
        return None
    in_band = verifier.in_band(score, threshold)
    if trace is not None:
        trace.append(Check(
            "band", "pass" if in_band else "skipped",
            f"score {score:.4f} {'<' if in_band else '>='} {threshold + verifier.band:.4f} "
            f"(threshold + band): {', '.join(MODEL_CHECKS[:-1])} and {MODEL_CHECKS[-1]} "
            f"{'checked' if in_band else 'skipped'}"))
    conflict = verifier.conflict(query, stored, content=in_band, trace=trace)
    if conflict is None:
        return None
    if trace is not None:
        trace.append(Check(conflict.check or conflict.slot, "fail", str(conflict)))
    if trust is None or conflict.slot not in MODEL_SLOTS:
        return "verifier", str(conflict)
    if score < trust:
        if trace is not None:
            trace.append(Check("trust", "fail", f"score {score:.4f} < the namespace's trust "
                                                f"score {trust:.4f}"))
        return "verifier", str(conflict)
    if trace is not None:
        trace.append(Check("trust", "pass", (
            f"score {score:.4f} >= the namespace's trust score {trust:.4f}: served over "
            f"the {conflict.slot} slot's conflict, the checks after it not run; a verdict "
            "on this hit moves the trust score")))
    return TRUSTED, str(conflict)


def negative(asked: Asked, negatives: list[bytes],
             radius: float) -> tuple[str | None, str | None]:
    """("negative", detail) when the asked query is within `radius` of the negatives."""
    stored = np.frombuffer(b"".join(negatives), dtype="<f4").reshape(len(negatives), -1)
    vector = asked.vector()
    if stored.shape[1] != vector.shape[1]:
        return None, None
    closest = float(np.max(stored @ vector[0]))
    if closest < radius:
        return None, None
    return "negative", (f"the entry was marked wrong for a query {closest:.4f} similar "
                        f"to this one (>= {radius})")


def within_bytes(matches: list[Match], limit: int) -> list[Match]:
    """The best matches whose JSON fits in `limit` bytes; the best one always."""
    kept: list[Match] = []
    total = 0
    for match in matches:
        total += len(json.dumps(match.to_json()).encode("utf-8"))
        if kept and total > limit:
            break
        kept.append(match)
    return kept


def matches_filter(entry: Entry, wanted: dict[str, Any] | None) -> bool:
    return not wanted or all(entry.metadata.get(k) == v for k, v in wanted.items())
