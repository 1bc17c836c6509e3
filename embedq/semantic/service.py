"""The semantic cache: (query, payload) entries in namespaces, found again by meaning.

`SemanticCache` orchestrates embed -> index -> table:
  put     embed the query (EmbeddingService.embed: fingerprint, exact cache, coalescing),
          write the row and its change to the table, then catch the index up;
  lookup  embed the query, search the namespace's index (cosine, [-1, 1]), read the
          candidates' rows (expired ones never hit), keep those at or above the threshold
          that the contrast guard lets through (guard.py) and that match the metadata
          filter (each candidate judged in lookup.py), and count the hit or the miss; each
          served match gets a `hit_id`;
  feedback  a caller's verdict on a served hit (feedback.py): a wrong one stores a negative
          (the entry is refused for queries near the one asked) and, under the
          namespace's `max_false_hit_rate`, raises its threshold (budget.py) or, for a
          hit served over a model-judged conflict, its trust score;
  configure a namespace's base threshold and error budget, and under a budget its trust
          score: a candidate at or above it that the verifier refuses only on a slot
          the model judges (content, disjoint) is served.
A lookup runs at the threshold it names, else the namespace's (its base, else the
default, raised by the budget's rule); the budget's threshold is a floor for both.
A threshold of 1.0 means "this exact text" and is answered from the table by the text's
digest, without embedding. The table is the source of truth; indexes are views (sync.py).
The cache serves the default model's space, following a switch of `default` (spaces.py).

Bounds, so no caller can make one request (or the table) unboundedly large:
  ttl_s      at most MAX_TTL_S (ten years); past that the expiry overflows datetime
  k          at most MAX_K matches per lookup
  bytes      one lookup returns matches, best first, while their JSON stays within
             EMBEDQ_SEMANTIC_MAX_LOOKUP_BYTES; the best match is always returned (one entry
             is bounded by the payload limit), and `truncated` says when some were left off
  JSON       payload, metadata and filter nest at most MAX_JSON_DEPTH levels (limits.py)
  text       no NUL (Postgres text and jsonb cannot hold it), no lone surrogate (not text)
  namespaces at most EMBEDQ_SEMANTIC_MAX_NAMESPACES in all and EMBEDQ_TENANT_MAX_NAMESPACES
             per tenant (store.py), entries per namespace at most
             EMBEDQ_SEMANTIC_MAX_ENTRIES (least recently hit evicted first), live entries
             per tenant at most EMBEDQ_TENANT_MAX_ENTRIES (refused, nothing evicted)
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from embedq.config import Settings
from embedq.coordination.hot_keys import RATES
from embedq.encoders.tokens import known_words
from embedq.errors import EmbedqError, InputTooLarge, InvalidInput, NotFound
from embedq.fingerprint import space_of
from embedq.limits import check_input_chars, check_json, check_text
from embedq.models import DEFAULT_TENANT
from embedq.semantic import synonyms
from embedq.semantic.engine import CandidateSearch
from embedq.semantic.feedback import FeedbackStore, Policy, new_hit_id
from embedq.semantic.index import Hit, Matrix, unit_rows
from embedq.semantic.inputs import (
    NAMESPACE_RE,
    check_lookup,
    check_namespace,
    check_policy,
    check_threshold,
)
from embedq.semantic.lookup import (
    EXACT,
    TRUSTED,
    Asked,
    Considered,
    LookupResult,
    Match,
    mend,
    negative,
    refusal,
    within_bytes,
)
from embedq.semantic.spaces import Embedder, EmbedResult, Space, Spaces
from embedq.semantic.store import SHARED_NAMES, Entry, SemanticStore, TenantCaps, utcnow
from embedq.semantic.verify import Check, Verifier

MAX_K = 100
MAX_TTL_S = 10 * 365 * 86_400

# The result types live in lookup.py and are still importable from here.
__all__ = [
    "EXACT", "MAX_K", "MAX_TTL_S", "NAMESPACE_RE", "Considered", "EmbedResult", "Embedder",
    "LookupResult", "Match", "SemanticCache", "check_namespace", "check_threshold",
    "space_of",
]


class SemanticCache:
    """One per process: owns the indexes of the default model's space (following a
    switch of the `default` alias) and their sync."""

    def __init__(self, service: Embedder, settings: Settings | None = None, *,
                 start: bool = True) -> None:
        self.service = service
        self.settings = settings or service.settings
        s = self.settings.semantic  # ranges and choices were checked with the settings
        self.default_threshold = s.threshold
        self.store = SemanticStore(service.db)
        self.feedback = FeedbackStore(service.db, default_threshold=self.default_threshold,
                                      window=s.feedback_window)
        self.spaces = Spaces(service, self.settings, self.store, [self.feedback.sweep],
                             start)
        synonyms.configure(s.wordnet)  # read on the first candidate the verifier checks
        self.verifier = (Verifier(self._embed_spans, band=s.verify_band,
                                  known=known_words(self.settings)) if s.verify else None)

    def view(self) -> Space:
        """The space of the model the `default` alias names now."""
        return self.spaces.view()

    # The space's parts, as they are now (tests and `embedq cache stats` read them).
    @property
    def model(self) -> str:
        return self.view().model

    @property
    def space(self) -> str:
        return self.view().space

    @property
    def sync(self) -> CandidateSearch:
        return self.view().sync

    def _embed_spans(self, texts: list[str]) -> list[npt.NDArray[np.float32]]:
        return self.service.embed(texts, model=self.spaces.current.name).vectors()

    # --- input checks
    def _query(self, query: Any) -> str:
        if not isinstance(query, str):
            raise InvalidInput(f"query is {type(query).__name__}, not a string: send the "
                               "question or text to cache", "query")
        if not query.strip():
            raise InvalidInput("query is empty: send the question or text to cache", "query")
        check_input_chars(query, self.settings, "query", "query")
        return check_text(query, "query")

    def _json_size(self, value: Any, name: str) -> None:
        check_json(value, name)
        try:
            size = len(json.dumps(value, allow_nan=False).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"{name} is not JSON ({exc}): send JSON values", name) from exc
        limit = self.settings.semantic.max_payload_bytes
        if size > limit:
            raise InputTooLarge(
                f"{name} is {size} bytes as JSON; the limit is {limit} "
                "(EMBEDQ_SEMANTIC_MAX_PAYLOAD_BYTES): store a reference instead", name,
            )

    def _vector(self, query: str, tenant: str | None = None, view: Space | None = None
                ) -> Matrix:
        """The query's vector in `view`'s space, fingerprinted for `tenant` (strict
        isolation: the tenant's own exact cache; shared: everyone's)."""
        view = view or self.view()
        vector = self.service.embed([query], model=view.name, tenant=tenant).vectors()[0]
        return unit_rows(vector.reshape(1, -1))

    # --- the calls
    def put(
        self, namespace: str, query: str, payload: Any, *, ttl_s: int | None = None,
        sliding: bool | None = None, metadata: dict[str, Any] | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> int:
        """Store (query, payload); the same query text replaces the payload. Returns the id.
        A new namespace is `tenant`'s; another tenant's namespace raises NotFound."""
        check_namespace(namespace)
        query = self._query(query)
        self._json_size(payload, "payload")
        metadata = {} if metadata is None else metadata
        if not isinstance(metadata, dict):
            raise InvalidInput("metadata must be a JSON object", "metadata")
        self._json_size(metadata, "metadata")
        if ttl_s is not None and (isinstance(ttl_s, bool) or not isinstance(ttl_s, int)
                                  or not 0 < ttl_s <= MAX_TTL_S):
            raise InvalidInput(
                f"ttl_s {ttl_s!r} must be a positive integer of seconds, at most {MAX_TTL_S} "
                "(ten years): omit it for an entry that never expires", "ttl_s",
            )
        view = self.view()
        vector = self._vector(query, tenant, view)
        result = self.store.put(
            namespace=namespace, model=view.model, space=view.space, query=query,
            vector=np.ascontiguousarray(vector, dtype="<f4").tobytes(), payload=payload,
            metadata=metadata, ttl_s=ttl_s,
            sliding=self.settings.semantic.sliding_ttl if sliding is None else bool(sliding),
            max_entries=self.settings.semantic.max_entries,
            max_namespaces=self.settings.semantic.max_namespaces, tenant=tenant,
            caps=TenantCaps(self.settings.tenants.max_namespaces,
                            self.settings.tenants.max_entries),
        )
        view.sync.catch_up()  # this process reads its own writes at once
        return result.id

    def lookup(
        self, namespace: str, query: str, *, threshold: float | None = None, k: int = 1,
        filter: dict[str, Any] | None = None, explain: bool = False,
        tenant: str | None = None,
    ) -> LookupResult:
        """Matches at or above the threshold, best first; an unknown namespace is a miss.
        The query is embedded for `tenant` (the caller; see `_vector`).

        With `explain`, the result also lists every candidate the index returned, with
        its score, why it was refused, and the checks it passed (Considered.checks)."""
        check_namespace(namespace)
        query = self._query(query)
        self.service.hot_keys.offer("namespace", [namespace])
        policy = self.feedback.policy(namespace)
        threshold, trust = self._runs_at(policy, threshold), policy.trusts_above()
        check_lookup(k, filter, MAX_K)
        now = utcnow()
        considered: list[Considered] = []
        view = self.view()
        asked = Asked(query, lambda text: self._vector(text, tenant, view))
        candidates, rows = self._candidates(view, namespace, asked, threshold, k, filter, now)
        candidates, rows, meant = mend(asked, candidates, rows, self._known(threshold),
                                       lambda ids: self.store.live_queries(ids, now),
                                       lambda ids: self.store.live_entries(ids, now))
        negatives = self.feedback.negatives(rows)
        matches: list[Match] = []
        overs: list[float | None] = []  # each match's trust score, where served over it
        for entry_id, score in candidates:
            entry = rows.get(entry_id)
            trace = [c for c in [meant.get(entry_id)] if c] if explain else None
            refused, reason = refusal(query, entry, score, threshold, filter,
                                      guard=self.settings.semantic.contrast_guard,
                                      verifier=self.verifier, trace=trace, trust=trust)
            refused, over = (None, True) if refused == TRUSTED else (refused, False)
            if refused is None and entry_id in negatives:
                refused, reason = negative(asked, negatives[entry_id],
                                           self.settings.semantic.negative_similarity)
            if trace is not None and refused in (None, "negative"):
                trace.append(Check("negative", "fail", reason) if refused else Check(
                    "negative", "pass", None if entry_id in negatives else "no negatives"))
            if refused is None and len(matches) >= k:
                refused = "beyond_k"
            if refused is None and entry is not None:
                matches.append(Match(entry.id, round(score, 6), entry.query, entry.payload,
                                     entry.metadata, new_hit_id()))
                overs.append(trust if over else None)
            if explain:
                considered.append(Considered(entry_id, round(score, 6),
                                             None if entry is None else entry.query,
                                             refused, reason, trace))
            elif len(matches) >= k:
                break
        kept = within_bytes(matches, self.settings.semantic.max_lookup_bytes)
        served = [(m.hit_id or "", m.id, m.score, o)  # kept: the first of the matches
                  for m, o in zip(kept, overs, strict=False)]
        self.store.record_lookup(namespace, [m.id for m in kept], now, also=lambda s: (
            self.feedback.record_hits(s, namespace, view.space, query, served, threshold,
                                      self.settings.semantic.feedback_ttl_s, now)))
        return LookupResult(bool(kept), kept, threshold, truncated=len(kept) < len(matches),
                            considered=considered if explain else None)

    def _known(self, threshold: float) -> frozenset[str]:
        """The words the model knows, for `mend`: none (no rewrite) without the verifier,
        which judges a rewritten candidate, or at an exact-text threshold."""
        return self.verifier.known if self.verifier and threshold < EXACT else frozenset()

    def _runs_at(self, policy: Policy, threshold: float | None) -> float:
        """The threshold a lookup runs at: the one asked, else the namespace's policy's;
        the budget's floor, if any, raises either."""
        threshold = (policy.runs_at(self.default_threshold) if threshold is None
                     else check_threshold(threshold))
        floor = policy.floor()
        if floor is not None:
            threshold = max(threshold, floor)
        return threshold

    def _candidates(
        self, view: Space, namespace: str, asked: Asked, threshold: float, k: int,
        filter: dict[str, Any] | None, now: datetime,
    ) -> tuple[list[Hit], dict[int, Entry]]:
        """(entry id, score) best first, and the live rows of those at the threshold: at
        EXACT the entry with the asked text, read by its digest (no embedding), else the
        index's nearest (more of them when a filter may refuse some)."""
        if threshold >= EXACT:
            entry = self.store.exact_entry(namespace, view.space, asked.query, now)
            candidates = [(entry.id, 1.0)] if entry is not None else []
            rows = {entry.id: entry} if entry is not None else {}
        else:
            fetch = k + 4 if not filter else max(4 * k, 32)
            candidates = view.sync.search(namespace, asked.vector(), fetch)
            rows = self.store.live_entries([i for i, s in candidates if s >= threshold], now)
        return candidates, rows

    def configure(self, namespace: str, *, max_false_hit_rate: float | None = None,
                  threshold: float | None = None, trust_score: float | None = None,
                  tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
        """Set the namespace's policy, creating the namespace if new (counted against
        EMBEDQ_SEMANTIC_MAX_NAMESPACES, and `tenant`'s): `threshold` its base (None: the
        server's default), `max_false_hit_rate` its error budget in [0, 1) (None: no
        budget), `trust_score` (needs a budget) the score from which a candidate the
        verifier refuses only on a model-judged slot is served. Another tenant's namespace
        raises NotFound."""
        check_namespace(namespace)
        rate, base, trust = check_policy(max_false_hit_rate, threshold, trust_score)
        with self.store.writing(namespace, tenant) as s:
            self.store.ensure_namespace(
                s, namespace, self.settings.semantic.max_namespaces, tenant,
                caps=TenantCaps(self.settings.tenants.max_namespaces,
                                self.settings.tenants.max_entries))
            policy = self.feedback.configure(
                s, namespace, base_threshold=base, max_false_hit_rate=rate, now=utcnow(),
                base_trust_score=trust)
        return {"namespace": namespace, **self._policy_json(policy)}

    def _policy_json(self, policy: Policy) -> dict[str, Any]:
        return {"threshold": policy.runs_at(self.default_threshold),
                "base_threshold": (self.default_threshold if policy.base_threshold is None
                                   else policy.base_threshold),
                "max_false_hit_rate": policy.max_false_hit_rate,
                "trust_score": policy.trusts_above(),
                "base_trust_score": policy.base_trust_score}

    def give_feedback(self, namespace: str, hit_id: str, correct: bool,
                      tenant: str | None = None) -> dict[str, Any]:
        """Record whether a served hit was right. A wrong one stops its entry matching
        queries near the one asked, and under a budget may raise the namespace's
        threshold. NotFound for an unknown or expired hit id."""
        check_namespace(namespace)
        if not isinstance(hit_id, str):
            raise InvalidInput("id must be the hit_id string of a served match", "id")
        if not isinstance(correct, bool):
            raise InvalidInput("correct must be true or false", "correct")

        view = self.view()

        def negative(hit: Any) -> bytes | None:
            if hit.space != view.space:  # served by another model: its vector cannot apply
                return None
            return np.ascontiguousarray(self._vector(hit.query, tenant, view),
                                        dtype="<f4").tobytes()

        done = self.feedback.apply(namespace, hit_id, correct, negative, utcnow())
        return {"id": hit_id, "namespace": namespace, "entry_id": done.hit.entry_id,
                "correct": correct, "recorded": done.recorded, "negative": done.negative,
                **self._policy_json(done.policy)}

    def check_owner(self, namespace: str, tenant: str | None) -> None:
        """NotFound unless the namespace is `tenant`'s or holds nothing (None: any tenant):
        another tenant's namespace is answered like one that does not exist."""
        check_namespace(namespace)
        if tenant is not None and self.store.owner(namespace) not in (tenant, None):
            raise NotFound(f"namespace {namespace!r} does not exist for this tenant "
                           f"({SHARED_NAMES})")

    def delete(self, namespace: str, entry_id: int, tenant: str | None = None) -> None:
        check_namespace(namespace)
        if not self.store.delete_entry(namespace, int(entry_id), tenant):
            raise NotFound(f"no entry {entry_id} in namespace {namespace!r}")
        self.sync.catch_up()

    def drop(self, namespace: str, tenant: str | None = None) -> int:
        """Delete the whole namespace (`tenant`'s, when given); return how many entries went."""
        check_namespace(namespace)
        removed = self.store.drop_namespace(namespace, tenant)
        self.feedback.drop(namespace)
        self.sync.catch_up()
        return removed

    def stats(self, namespace: str) -> dict[str, Any]:
        check_namespace(namespace)
        view = self.view()
        stats = self.store.stats(namespace, utcnow(), view.space)
        stats.update(view.sync.describe(namespace))
        stats["model"] = view.model
        stats.update(self._policy_json(self.feedback.policy(namespace)))
        stats["feedback"] = self.feedback.counts(namespace)
        stats["served"] = self.feedback.served(namespace, utcnow(),
                                               self.settings.semantic.feedback_ttl_s)
        stats["lookups_per_s"], stats["hot"] = self._heat(namespace)
        stats["replica"] = self.sync.memory()
        return stats

    def _heat(self, namespace: str) -> tuple[float | None, bool | None]:
        """The namespace's lookups per second summed over the live processes (as they
        last published them) and whether that passes EMBEDQ_SEMANTIC_HOT_LOOKUPS_PER_S;
        None when the hot store cannot be read."""
        try:
            merged = self.service.hot.hot_keys()
        except EmbedqError:
            return None, None
        rate = dict(merged.get(RATES, [])).get(namespace, 0.0)
        return round(rate, 3), rate > self.settings.semantic.hot_lookups_per_s

    def close(self, save: bool = True) -> None:
        self.spaces.close(save=save)
