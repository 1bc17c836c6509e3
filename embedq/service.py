"""The embedding service: lookup -> claim -> submit -> collect.

`EmbeddingService.embed` is the whole life of a request, top to bottom:

  1. fingerprint every text and collapse duplicates before any I/O;
  2. exact cache: one MGET on the hot tier, one query on the durable tier for the rest
     (found there: copied back to the hot tier);
  3. claim each miss (SET NX); winners are packed into messages and queued once,
     losers join the computation already in flight;
  4. wait for "done" notifications (polling as a fallback); a fingerprint whose claim
     vanished with no vector (dead leader, lost broker) is claimed and queued again;
  5. answer in input order, each text with its vector or its own error.

Each caller's interest in its fingerprints is registered with the claims and lasts until
its deadline (or until its client disconnects, `Callers.leave`): a worker does not encode
what nobody waits for any more.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from celery import Celery

from embedq import coordination
from embedq.cache import HotStore, make_hot_store
from embedq.cache.counters import CounterWriter
from embedq.cache.waiters import Waiters
from embedq.config import Settings
from embedq.encoders import model_identity
from embedq.encoders.tiers import TIERS
from embedq.errors import (
    EmbeddingTimeout,
    EmbedqError,
    InvalidInput,
    Unavailable,
    UnknownModel,
)
from embedq.fingerprint import EncodeSpec, fingerprint
from embedq.models import Database
from embedq.models.vectors import VectorStore, from_bytes, open_vectors
from embedq.tasks.app import create_app
from embedq.tasks.publish import plan_messages, publish_embed

log = logging.getLogger("embedq.service")


# (spec, claimed (fingerprint, text) pairs, claim owner, deadline, the requests that
# want them) -> the outcomes settled there, or None when this process does not serve the
# spec; what is not settled is awaited like any claim.
EncodeHere = Callable[[EncodeSpec, list[tuple[str, str]], str, float, coordination.Callers],
                      dict[str, bytes | EmbedqError] | None]

Vector = npt.NDArray[np.float32]
POLL_S = 0.25
PUBLISH_RETRY_INTERVAL_S = 0.25
CLAIM_CHECK_S = 1.0


@dataclass
class Outcome:
    """One input's answer: a vector, or the error that explains why not."""

    vector: Vector | None = None
    error: EmbedqError | None = None
    source: str = ""  # "hot", "durable", "computed", "coalesced"


@dataclass
class EmbedResult:
    outcomes: list[Outcome]
    spec: EncodeSpec
    counts: dict[str, int] = field(default_factory=dict)

    def vectors(self) -> list[Vector]:
        """Vectors in input order; raises the first error if any input failed."""
        out = []
        for i, o in enumerate(self.outcomes):
            if o.error is not None:
                raise type(o.error)(f"input {i}: {o.error}") from o.error
            assert o.vector is not None
            out.append(o.vector)
        return out


class EmbeddingService:
    """The producer side of embedq: answers from cache, joins work in flight, or queues it.

    `before_submit` is called before work is queued: the deployment uses it to start the
    embedded worker on first use (`embedq.deployment`). `encode_here`, when given, encodes
    what this process claimed instead of queueing it (EMBEDQ_ONLINE_ENCODE=local,
    `embedq.workers.local`); without it the service never runs a model itself.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        hot: HotStore | None = None,
        db: Database | None = None,
        durable: VectorStore | None = None,
        app: Celery | None = None,
        before_submit: Callable[[], None] | None = None,
        encode_here: EncodeHere | None = None,
    ) -> None:
        self.settings = settings
        self.hot = hot if hot is not None else make_hot_store(settings)
        self.db = db if db is not None else Database.from_settings(settings)
        self._owns_durable = durable is None
        self.durable = durable if durable is not None else open_vectors(
            self.db, sync_commit=settings.vector_sync_commit)
        self.app = app if app is not None else create_app(settings)
        # One identity per served tier (EMBEDQ_TIERS); the first is the default, and
        # `model`/`revision` name it. A tier's revision is what routes its work to the
        # worker encoder that serves it.
        self.revisions = {t: model_identity(settings, t)[1] for t in settings.tiers}
        self.model, self.revision = model_identity(settings)
        self.waiters = Waiters(self.hot)
        self.counters = CounterWriter(self.hot)
        self.before_submit = before_submit
        self.encode_here = encode_here

    # --- the request
    def spec(
        self, model: str | None = None, dimensions: int | None = None,
        normalize: bool | None = None, precision: str | None = None,
        tenant: str | None = None,
    ) -> EncodeSpec:
        """The spec a request is fingerprinted with. A model name suffix
        (`all-MiniLM-L6-v2:int8`) or `precision` picks the tier; default the first.
        `tenant` enters it only with EMBEDQ_TENANT_ISOLATION=strict (`isolated`)."""
        tier = self.tier_of(model, precision)
        dims = dimensions if dimensions is not None else self.settings.dimensions
        norm = self.settings.normalize if normalize is None else normalize
        return EncodeSpec(self.model, self.revisions[tier], dims, norm,
                          tenant=self.isolated(tenant))

    def isolated(self, tenant: str | None) -> str | None:
        """The tenant as fingerprints carry it: itself in strict isolation, else None
        (one exact cache shared by every tenant)."""
        return tenant if self.settings.tenant_isolation == "strict" else None

    def model_name(self, tier: str) -> str:
        """How clients name `tier`: the bare model for the default, else `<model>:<tier>`."""
        return self.model if tier == self.settings.tiers[0] else f"{self.model}:{tier}"

    def tier_of(self, model: str | None = None, precision: str | None = None) -> str:
        """The served tier a request asks for; UnknownModel/InvalidInput saying what to send."""
        suffix = None
        if model is not None:
            base, sep, tail = model.rpartition(":")
            if sep and tail in TIERS:
                model, suffix = base, tail
            if model not in {self.model, self.settings.model}:
                raise UnknownModel(
                    f"model {model!r} is not served here: use {self.model!r} "
                    "(GET /v1/models lists the models)", "model",
                )
        if suffix is not None and precision is not None and suffix != precision:
            raise InvalidInput(
                f"model suffix {suffix!r} and precision {precision!r} disagree: "
                "send one of them", "precision",
            )
        tier = suffix if suffix is not None else precision
        if tier is None:
            tier = self.settings.tiers[0]
        served = ", ".join(self.settings.tiers)
        if tier not in TIERS:
            raise InvalidInput(
                f"precision {tier!r} is unknown: use one of {served} "
                f"(the tiers this deployment serves, EMBEDQ_TIERS)", "precision",
            )
        if tier not in self.revisions:
            error = UnknownModel if suffix is not None else InvalidInput
            raise error(
                f"precision tier {tier!r} is not served here (EMBEDQ_TIERS={served}): use "
                f"one of {served}, or have the operator add {tier} to EMBEDQ_TIERS",
                "model" if suffix is not None else "precision",
            )
        return tier

    def embed(
        self,
        texts: list[str],
        *,
        model: str | None = None,
        dimensions: int | None = None,
        normalize: bool | None = None,
        timeout_s: float | None = None,
        requests: int = 1,
        precision: str | None = None,
        tenant: str | None = None,
        callers: coordination.Callers | None = None,
    ) -> EmbedResult:
        """`callers`: the requests `texts` came from (one by default), which the API tells
        when one goes away; the call returns early once every one has gone."""
        spec = self.spec(model, dimensions, normalize, precision, tenant)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InvalidInput(f"input {i} is not a string", "input")
            if not t:
                raise InvalidInput(f"input {i} is an empty string: send non-empty text", "input")
        fps = [fingerprint(spec, t) for t in texts]
        text_of = dict(zip(fps, texts, strict=True))
        unique = list(text_of)
        found = self._lookup(unique)
        misses = [fp for fp in unique if fp not in found]
        deadline = time.monotonic() + (timeout_s or self.settings.request_timeout_s)
        callers = callers if callers is not None else coordination.Callers([len(texts)])
        callers.bind(fps, deadline)
        won, lost = self._claim(misses, callers)
        started = time.perf_counter()
        here = self._encode_here(spec, won, text_of, callers, deadline) if won else None
        if here is None and won and self._submit(
                spec, [(fp, text_of[fp]) for fp in won], callers.owner, deadline):
            log.info("leader start: queued %d fingerprints (first %s)", len(won), won[0][:12])
        settled = here if here is not None else {}
        answers = self._collect(spec, [fp for fp in won + lost if fp not in settled],
                                text_of, deadline, callers)
        answers.update(settled)
        cost_ms = (time.perf_counter() - started) * 1000
        counts = self._record(fps, texts, found, won, lost, answers, requests, cost_ms)
        return EmbedResult(_outcomes(fps, found, won, answers), spec, counts)

    def _record(
        self, fps: list[str], texts: list[str], found: dict[str, tuple[str, bytes]],
        won: list[str], lost: list[str], answers: dict[str, bytes | EmbedqError],
        requests: int, cost_ms: float,
    ) -> dict[str, int]:
        """Count the request cluster-wide and log the leader and waiter lines."""
        counts = {
            "requests": requests,
            "lookups": 1,
            "texts": len(texts),
            "cache_hits": len(found),
            "cache_hits_hot": sum(1 for src, _ in found.values() if src == "hot"),
            "cache_hits_durable": sum(1 for src, _ in found.values() if src == "durable"),
            "coalesced": len(texts) - len(set(fps)) + len(lost),
            "submitted": len(won),
            "tokens_saved": _tokens_saved(fps, texts, won),
            "calls_saved": 0 if won else requests,
        }
        self.counters.add(counts)  # behind the answer: it does not wait for the write
        if won:
            failed = sum(1 for fp in won if isinstance(answers[fp], EmbedqError))
            log.info("leader finish: %d fingerprints (%d failed) cost_ms=%.1f",
                     len(won), failed, cost_ms)
        if lost:
            log.info("waiters resolved: %d fingerprints joined work in flight (%.1f ms)",
                     len(lost), cost_ms)
        return counts

    # --- steps
    def _lookup(self, fps: list[str]) -> dict[str, tuple[str, bytes]]:
        """Exact cache: one MGET, then one durable query for the rest."""
        found: dict[str, tuple[str, bytes]] = {}
        for fp, blob in zip(fps, self.hot.get_vectors(fps), strict=True):
            if blob is not None:
                found[fp] = ("hot", blob)
        rest = [fp for fp in fps if fp not in found]
        if rest:
            stored = self.durable.get_many(rest)
            if stored:
                self.hot.put_vectors(stored, self.settings.hot_ttl_s)
            found.update({fp: ("durable", blob) for fp, blob in stored.items()})
        return found

    def _claim(self, fps: list[str], callers: coordination.Callers
               ) -> tuple[list[str], list[str]]:
        won: list[str] = []
        lost: list[str] = []
        if fps:
            won, lost = coordination.claim_wanted(self.hot, fps, callers,
                                                  self.settings.claim_ttl_ms)
        return won, lost

    def _encode_here(self, spec: EncodeSpec, won: list[str], text_of: dict[str, str],
                     callers: coordination.Callers, deadline: float
                     ) -> dict[str, bytes | EmbedqError] | None:
        """Encode the claimed fingerprints in this process, when it does (None: queue
        them). A store failing before anything reached the model is not the caller's
        problem: the work is queued instead, with the queue path's retries. Any other
        failure frees the claims (nobody else waits out their ttl) and is raised."""
        if self.encode_here is None:
            return None
        try:
            return self.encode_here(spec, [(fp, text_of[fp]) for fp in won], callers.owner,
                                    deadline, callers)
        except Unavailable as exc:
            log.warning("encoding here failed before the model ran (%s): queueing instead",
                        exc)
            return None
        except Exception:
            with contextlib.suppress(EmbedqError):
                coordination.release(self.hot, won)
            raise

    def _submit(self, spec: EncodeSpec, pairs: list[tuple[str, str]], owner: str,
                deadline: float) -> bool:
        """Queue the work; True once published.

        A failed publish is tried again every PUBLISH_RETRY_INTERVAL_S for up to
        `publish_retry_s` (never past the request's deadline): a broker restarting under
        the request is a blip, not an answer. If it still fails, the claims are freed and
        the error is raised: the caller answers at once (503). When the claims cannot be
        freed either, the hot store went down with the broker (one Redis for both,
        restarting): this caller then waits like any waiter, riding the outage out until
        its deadline, and the rescue re-queues what lost its claim (a restarted Redis lost
        them all). False says nothing was published.
        """
        if self.before_submit is not None:
            self.before_submit()
        fps = [fp for fp, _ in pairs]
        text_of = dict(pairs)
        groups = [
            [(fp, text_of[fp]) for fp in part]
            for part in plan_messages(fps, self.settings.message_max_texts)
        ]
        give_up_at = min(deadline, time.monotonic() + self.settings.publish_retry_s)
        while True:
            try:
                publish_embed(self.app, spec, groups, self.settings.online_queue, owner=owner)
                return True
            except EmbedqError as exc:
                if time.monotonic() + PUBLISH_RETRY_INTERVAL_S < give_up_at:
                    log.warning("publish failed (%s): trying again", exc)
                    time.sleep(PUBLISH_RETRY_INTERVAL_S)
                    continue
                try:
                    coordination.release(self.hot, fps)  # do not block these for a claim ttl
                except Unavailable as gone:
                    log.warning("publish failed (%s) and the hot store is down too (%s): "
                                "waiting for it to come back", exc, gone)
                    return False
                raise

    def _collect(
        self,
        spec: EncodeSpec,
        fps: list[str],
        text_of: dict[str, str],
        deadline: float,
        callers: coordination.Callers,
    ) -> dict[str, bytes | EmbedqError]:
        """Wait for each fingerprint's outcome. A store outage is ridden out until the
        deadline; a claim that vanished with no vector (dead leader, a restarted empty
        broker) is claimed and queued again, unless no caller still here wants it. A caller
        that leaves has its interest withdrawn, and what no caller still here wants is
        no longer waited for (answered as timed out: nobody reads it)."""
        if not fps:
            return {}

        def requeue(orphans: list[str]) -> list[str]:
            won, _ = self._claim(callers.wanted(orphans), callers)
            if won:
                log.warning("re-queueing %d fingerprints whose claim expired", len(won))
                # Encoded here, their vectors arrive like any other (the claim is released
                # once they are stored).
                if self._encode_here(spec, won, text_of, callers, deadline) is None:
                    self._submit(spec, [(fp, text_of[fp]) for fp in won], callers.owner,
                                 deadline)
            return []  # every orphan is awaited again

        got = coordination.await_outcomes(
            self.hot, fps, deadline=deadline, adopt=requeue, durable=self.durable,
            poll_s=POLL_S, check_s=CLAIM_CHECK_S, wake=self.waiters, ride_out_outages=True,
            event=callers.wake,
            keep=lambda pending: coordination.still_wanted(self.hot, callers, pending),
        )
        answers: dict[str, bytes | EmbedqError] = {**got.vectors, **got.failures}
        for fp in got.pending:
            answers[fp] = got.outage or EmbeddingTimeout(
                "no vector within the request timeout; the work stays queued, "
                "retry the request to collect it"
            )
        return answers

    # --- introspection
    def stats(self) -> dict[str, int]:
        self.counters.flush()  # this process's requests are in what it reads
        return self.hot.counters()

    def close(self) -> None:
        self.counters.close()
        if self._owns_durable:
            self.durable.close()
        self.db.dispose()


def _outcomes(
    fps: list[str], found: dict[str, tuple[str, bytes]], won: list[str],
    answers: dict[str, bytes | EmbedqError],
) -> list[Outcome]:
    """One outcome per input, in input order, each saying where its answer came from."""
    computed = set(won)
    out = []
    for fp in fps:
        if fp in found:
            source, blob = found[fp]
            out.append(Outcome(from_bytes(blob), None, source))
            continue
        got = answers[fp]
        source = "computed" if fp in computed else "coalesced"
        if isinstance(got, EmbedqError):
            out.append(Outcome(None, got, source))
        else:
            out.append(Outcome(from_bytes(got), None, source))
    return out


def _tokens_saved(fps: list[str], texts: list[str], won: list[str]) -> int:
    """Tokens (about 4 characters each) a client without embedq would have paid for: every
    input except the first occurrence of each text this request computed."""
    computed = set(won)
    saved = 0
    for fp, text in zip(fps, texts, strict=True):
        if fp in computed:
            computed.discard(fp)
        else:
            saved += 1 + len(text) // 4
    return saved
