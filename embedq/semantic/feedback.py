"""Table access for the error budget: namespace policies, served hits, verdicts, negatives.

    policy     a namespace's base threshold, max_false_hit_rate and derived threshold;
               under a budget, its base and derived trust score (a hit at or above it
               that the verifier refused only on a model-judged slot is served)
    hits       every match a lookup serves gets a random id (32 hex digits) and a row
               kept EMBEDQ_SEMANTIC_FEEDBACK_TTL_S, so feedback can name it; counted by
               verdict (none yet: unverified) in stats and /metrics (served_hits)
    feedback   one verdict per hit, final: the same verdict again is an answer (recorded
               false), the other one is FeedbackConflict (HTTP 409)
    negatives  a wrong hit stores the asked query's vector against the entry

Verdicts and the policy are written in one transaction that holds the namespace's budget
row (FOR UPDATE on Postgres), so two verdicts at once recompute the threshold in turn.
The rule itself is budget.py; here it is only applied, twice: to the verdicts on hits that
passed every check (the threshold) and to those on hits served over a model-judged
conflict (the trust score), so neither population's errors move the other's bar.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from embedq.errors import InvalidInput, NotFound
from embedq.models import (
    Database,
    SemanticBudget,
    SemanticEntry,
    SemanticFeedback,
    SemanticHit,
    SemanticNegative,
)
from embedq.semantic.budget import Verdict, budget_threshold
from embedq.semantic.store import Entry

HIT_ID_HEX = 32


def new_hit_id() -> str:
    """An unguessable id for one served hit: only who was served it can judge it."""
    return secrets.token_hex(HIT_ID_HEX // 2)


class FeedbackConflict(InvalidInput):
    """Feedback contradicts the verdict already recorded for that hit (HTTP 409)."""


@dataclass(frozen=True)
class Policy:
    """A namespace's thresholds; None: not set (the server's default, no budget)."""

    base_threshold: float | None = None
    max_false_hit_rate: float | None = None
    threshold: float | None = None  # derived from feedback under the budget
    base_trust_score: float | None = None
    trust_score: float | None = None  # derived from feedback on the hits served over it

    def runs_at(self, default: float) -> float:
        """The threshold a lookup that names none runs at."""
        base = default if self.base_threshold is None else self.base_threshold
        return base if self.threshold is None else max(base, self.threshold)

    def floor(self) -> float | None:
        """The threshold no lookup of the namespace goes below (the budget's), or None."""
        return self.threshold if self.max_false_hit_rate is not None else None

    def trusts_above(self) -> float | None:
        """The score at or above which a candidate the verifier refuses only on a slot
        the model judges is served (a budget and a trust score set), or None."""
        if self.max_false_hit_rate is None or self.base_trust_score is None:
            return None
        return self.base_trust_score if self.trust_score is None else max(
            self.base_trust_score, self.trust_score)


@dataclass(frozen=True)
class ServedHit:
    id: str
    namespace: str
    space: str
    entry_id: int
    query: str
    score: float
    threshold: float
    correct: bool | None
    trust_score: float | None = None  # served over a model-judged conflict at this score


@dataclass(frozen=True)
class FeedbackResult:
    hit: ServedHit
    correct: bool
    recorded: bool  # False: this verdict was already recorded for the hit
    negative: bool  # a negative was stored against the entry
    policy: Policy


def _policy(row: SemanticBudget | None) -> Policy:
    if row is None:
        return Policy()
    return Policy(row.base_threshold, row.max_false_hit_rate, row.threshold,
                  row.base_trust_score, row.trust_score)


def _served(row: SemanticHit) -> ServedHit:
    return ServedHit(row.id, row.namespace, row.space, int(row.entry_id), row.query,
                     float(row.score), float(row.threshold), row.correct,
                     None if row.trust_score is None else float(row.trust_score))


class FeedbackStore:
    def __init__(self, db: Database, *, default_threshold: float, window: int) -> None:
        self.db = db
        self.default_threshold = default_threshold
        self.window = window

    # --- policy
    def policy(self, namespace: str) -> Policy:
        with self.db.session() as s:
            return _policy(s.get(SemanticBudget, namespace))

    def configure(self, s: Session, namespace: str, *, base_threshold: float | None,
                  max_false_hit_rate: float | None, now: datetime,
                  base_trust_score: float | None = None) -> Policy:
        """Set (replace) the namespace's policy and derive its threshold and trust score
        from the verdicts, in `s`: a transaction holding the writers' lock
        (SemanticStore.writing), in which the namespace exists."""
        row = self._budget_row(s, namespace)
        if row is None:
            row = SemanticBudget(namespace=namespace)
            s.add(row)
        row.base_threshold, row.max_false_hit_rate = base_threshold, max_false_hit_rate
        row.base_trust_score = base_trust_score
        self._derive(s, row, now)
        return _policy(row)

    def _budget_row(self, s: Session, namespace: str) -> SemanticBudget | None:
        return s.scalar(select(SemanticBudget).where(SemanticBudget.namespace == namespace)
                        .with_for_update())

    def _derive(self, s: Session, row: SemanticBudget, now: datetime) -> None:
        row.updated_at = now
        if row.max_false_hit_rate is None:
            row.threshold = row.trust_score = None
            return
        verified, trusted = self.verdicts(row.namespace, s)
        base = self.default_threshold if row.base_threshold is None else row.base_threshold
        row.threshold = budget_threshold(verified, base, row.max_false_hit_rate)
        row.trust_score = None if row.base_trust_score is None else budget_threshold(
            trusted, row.base_trust_score, row.max_false_hit_rate)

    def verdicts(self, namespace: str, s: Session | None = None
                 ) -> tuple[list[Verdict], list[Verdict]]:
        """The namespace's most recent `window` verdicts: those on hits that passed every
        check (with the threshold in force), and those on hits served over a model-judged
        conflict (with the trust score in force as their bar)."""
        if s is None:
            with self.db.session() as fresh:
                return self.verdicts(namespace, fresh)
        s.flush()
        rows = s.execute(
            select(SemanticFeedback.score, SemanticFeedback.threshold,
                   SemanticFeedback.trust_score, SemanticFeedback.correct)
            .where(SemanticFeedback.namespace == namespace)
            .order_by(SemanticFeedback.id.desc()).limit(self.window)
        ).all()
        verified = [Verdict(float(r.score), float(r.threshold), bool(r.correct))
                    for r in rows if r.trust_score is None]
        trusted = [Verdict(float(r.score), float(r.trust_score), bool(r.correct))
                   for r in rows if r.trust_score is not None]
        return verified, trusted

    def counts(self, namespace: str) -> dict[str, int]:
        with self.db.session() as s:
            rows = s.execute(
                select(SemanticFeedback.correct, func.count())
                .where(SemanticFeedback.namespace == namespace)
                .group_by(SemanticFeedback.correct)
            ).all()
        got = {bool(correct): int(n) for correct, n in rows}
        return {"correct": got.get(True, 0), "wrong": got.get(False, 0)}

    # --- served hits
    def served(self, namespace: str, now: datetime, window_s: int) -> dict[str, Any]:
        """The namespace's hits served in the last `window_s` (the feedback ttl), by
        verdict (served_hits), the share of them unverified (None: none served), and how
        many were served over the trust score (a model-judged conflict: `over_trust`)."""
        counts = served_hits(self.db, now, namespace)
        total = counts["correct"] + counts["wrong"] + counts["unverified"]
        return {"window_s": window_s, **counts, "unverified_share": (
            round(counts["unverified"] / total, 4) if total else None)}

    def record_hits(self, s: Session, namespace: str, space: str, query: str,
                    matches: Sequence[tuple[str, int, float, float | None]], threshold: float,
                    ttl_s: int, now: datetime) -> None:
        """One row per served match (hit id, entry id, score, the trust score it was
        served over or None), judgeable for `ttl_s`, written in `s` (the lookup's own
        record, SemanticStore.record_lookup)."""
        expires = now + timedelta(seconds=ttl_s)
        s.add_all(SemanticHit(
            id=hit_id, namespace=namespace, space=space, entry_id=entry_id, query=query,
            score=score, threshold=threshold, trust_score=trust, correct=None,
            created_at=now, expires_at=expires) for hit_id, entry_id, score, trust in matches)

    def served_hit(self, namespace: str, hit_id: str, now: datetime) -> ServedHit:
        """The hit, or NotFound saying where hit ids come from and how long they last."""
        with self.db.session() as s:
            row = s.get(SemanticHit, hit_id) if _well_formed(hit_id) else None
            if row is None or row.namespace != namespace or row.expires_at <= now:
                raise NotFound(
                    f"no served hit {hit_id!r} in namespace {namespace!r}: send the hit_id "
                    "of a match a lookup of this namespace returned; hit ids expire after "
                    "EMBEDQ_SEMANTIC_FEEDBACK_TTL_S")
            return _served(row)

    def apply(self, namespace: str, hit_id: str, correct: bool,
              negative: Callable[[ServedHit], bytes | None], now: datetime) -> FeedbackResult:
        """Record the verdict, store a negative for a wrong hit (`negative` gives the asked
        query's vector, or None to store none), and derive the threshold again."""
        hit = self.served_hit(namespace, hit_id, now)
        if hit.correct is not None:
            return self._repeat(hit, correct)
        vector = None if correct else negative(hit)
        with self.db.session() as s:
            budget = self._budget_row(s, namespace)
            row = s.get(SemanticHit, hit_id, with_for_update=True)
            if row is None:  # swept meanwhile
                return self.apply(namespace, hit_id, correct, negative, now)
            if row.correct is not None:
                return self._repeat(_served(row), correct)
            row.correct = correct
            s.add(SemanticFeedback(namespace=namespace, entry_id=hit.entry_id, score=hit.score,
                                   threshold=hit.threshold, trust_score=hit.trust_score,
                                   correct=correct, created_at=now))
            stored = False
            if vector is not None:
                entry = s.get(SemanticEntry, hit.entry_id)
                if entry is not None and entry.namespace == namespace:
                    s.add(SemanticNegative(entry_id=hit.entry_id, namespace=namespace,
                                           vector=vector, created_at=now))
                    stored = True
            if budget is not None:
                self._derive(s, budget, now)
            policy = _policy(budget)
        return FeedbackResult(hit, correct, True, stored, policy)

    def _repeat(self, hit: ServedHit, correct: bool) -> FeedbackResult:
        if hit.correct != correct:
            raise FeedbackConflict(
                f"hit {hit.id!r} was already marked correct={hit.correct}; feedback on a hit "
                "is final: to stop the entry serving, delete it "
                f"(DELETE /v1/semantic-cache/{hit.namespace}/{hit.entry_id})", "correct")
        return FeedbackResult(hit, correct, False, False, self.policy(hit.namespace))

    # --- negatives
    def negatives(self, entries: dict[int, Entry]) -> dict[int, list[bytes]]:
        """The negatives of these entries: vectors of queries each must not match.

        A negative older than its entry is another entry's that had the same id (SQLite
        reuses ids and does not enforce the foreign key), and is ignored."""
        if not entries:
            return {}
        with self.db.session() as s:
            rows = s.execute(
                select(SemanticNegative.entry_id, SemanticNegative.vector,
                       SemanticNegative.created_at)
                .where(SemanticNegative.entry_id.in_(list(entries)))
            ).all()
        out: dict[int, list[bytes]] = {}
        for entry_id, vector, created in rows:
            entry = entries[int(entry_id)]
            if created >= entry.created_at:
                out.setdefault(int(entry_id), []).append(bytes(vector))
        return out

    # --- upkeep
    def drop(self, namespace: str) -> None:
        """Forget the namespace's policy, hits, verdicts and negatives."""
        with self.db.session() as s:
            for table in (SemanticBudget, SemanticHit, SemanticFeedback, SemanticNegative):
                s.execute(delete(table).where(table.namespace == namespace))

    def sweep(self, now: datetime) -> int:
        """Delete served hits past their feedback window; return how many."""
        with self.db.session() as s:
            gone = s.execute(delete(SemanticHit).where(SemanticHit.expires_at <= now))
            return max(int(getattr(gone, "rowcount", 0) or 0), 0)


def served_hits(db: Database, now: datetime, namespace: str | None = None) -> dict[str, int]:
    """Served hits whose feedback window is still open (EMBEDQ_SEMANTIC_FEEDBACK_TTL_S):
    `correct` and `wrong` by their verdict, `unverified` with none yet, and of all of
    them `over_trust`, served over a trust score (a model-judged conflict); the
    namespace's, or every namespace's for None. A hit past its window is swept, judged
    or not. One query."""
    over = SemanticHit.trust_score.is_not(None)
    query = select(SemanticHit.correct, over, func.count()).where(SemanticHit.expires_at > now)
    if namespace is not None:
        query = query.where(SemanticHit.namespace == namespace)
    with db.session() as s:
        rows = s.execute(query.group_by(SemanticHit.correct, over)).all()
    got: dict[bool | None, int] = {}
    for correct, _, n in rows:
        got[correct] = got.get(correct, 0) + int(n)
    return {"correct": got.get(True, 0), "wrong": got.get(False, 0),
            "unverified": got.get(None, 0),
            "over_trust": sum(int(n) for _, trusted, n in rows if trusted)}


def _well_formed(hit_id: str) -> bool:
    return len(hit_id) == HIT_ID_HEX and all(c in "0123456789abcdef" for c in hit_id)
