"""What a semantic lookup returns, and why each candidate it weighed was kept or refused.

`SemanticCache.lookup` (service.py) finds candidates in the index and reads their rows;
this module judges them one by one:
  refusal        below the threshold, expired, refused by the contrast guard (guard.py)
                 or the verifier (verify.py), or not matching the metadata filter;
  negative       marked wrong (feedback.py) for a query at least as close as the radius;
  within_bytes   the best matches whose JSON fits the lookup's byte limit.
`Match`, `Considered` and `LookupResult` are the answer (`explain` lists every candidate).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from embedq.semantic.guard import contrast
from embedq.semantic.index import Matrix
from embedq.semantic.store import Entry
from embedq.semantic.verify import Verifier

EXACT = 1.0


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
    is gone or past its ttl), beyond_k; `reason` says more."""

    id: int
    score: float
    query: str | None
    refused: str | None
    reason: str | None = None

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
        self._embed = embed
        self._vector: Matrix | None = None

    def vector(self) -> Matrix:
        if self._vector is None:
            self._vector = self._embed(self.query)
        return self._vector


def refusal(query: str, entry: Entry | None, score: float, threshold: float,
            filter: dict[str, Any] | None, *, guard: bool,
            verifier: Verifier | None) -> tuple[str | None, str | None]:
    """(why a candidate is refused, detail), or (None, None) for a match. `guard`: the
    contrast guard is on (EMBEDQ_SEMANTIC_CONTRAST_GUARD); `verifier`: the verifier, if on."""
    if score < threshold:
        return "below_threshold", f"score {score:.4f} < threshold {threshold:.4f}"
    if entry is None:
        return "expired", "the entry was deleted or is past its ttl"
    if threshold < EXACT and entry.query != query:
        if guard:
            why = contrast(query, entry.query)
            if why is not None:
                return "guard", why
        if verifier is not None:
            conflict = verifier.conflict(
                query, entry.query, content=verifier.in_band(score, threshold))
            if conflict is not None:
                return "verifier", str(conflict)
    if not matches_filter(entry, filter):
        return "filter", "the entry's metadata does not match the filter"
    return None, None


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
