"""The embedding service: lookup -> claim -> submit -> collect.

`EmbeddingService.embed` is the whole life of a request, top to bottom:

  1. fingerprint every text and collapse duplicates before any I/O;
  2. exact cache: this process's memory tier (the vectors it read or received lately),
     then one MGET on the hot store, one query on the durable store for the rest (found
     there: copied back to the hot store);
  3. claim each miss (SET NX); winners are packed into messages and queued once,
     losers join the computation already in flight;
  4. wait for "done" notifications (polling as a fallback); a fingerprint whose claim
     vanished with no vector (dead leader, lost broker) is claimed and queued again;
  5. answer in input order, each text with its vector or its own error.

Each caller's interest in its fingerprints is registered with the claims and lasts until
its deadline (or until its client disconnects, `RequestGroup.leave`): a worker does not
encode what nobody waits for any more. Where a claimed miss is encoded (the queue, or this
process) is the executor's business (`embedq.coordination.executor`), chosen by the
deployment.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from celery import Celery

from embedq import stages
from embedq.config import Settings
from embedq.coordination import HotStore, make_hot_store
from embedq.coordination.counters import CounterWriter
from embedq.coordination.executor import Executor, Ticket
from embedq.coordination.hot_keys import HotKeys
from embedq.coordination.interest import RequestGroup
from embedq.coordination.local_tier import LocalTier
from embedq.coordination.waiting import REQUEST, Waiting
from embedq.encoders.catalog import Catalog, ServedModel
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
from embedq.models.alias import switched_aliases
from embedq.models.vectors import VectorStore, from_bytes, open_vectors
from embedq.tasks.app import create_app
from embedq.tasks.executor import QueueExecutor

log = logging.getLogger("embedq.service")

Vector = npt.NDArray[np.float32]


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

    `executor` is where the fingerprints it claims are encoded (default: the online
    queue); the deployment chooses it (`embedq.deployment`).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        hot: HotStore | None = None,
        db: Database | None = None,
        durable: VectorStore | None = None,
        app: Celery | None = None,
        executor: Executor | None = None,
        catalog: Catalog | None = None,
    ) -> None:
        self.settings = settings
        if settings.worker.stage_timing:
            stages.enable()
        self.hot = hot if hot is not None else make_hot_store(settings)
        self.db = db if db is not None else Database.from_settings(settings)
        self._owns_durable = durable is None
        self.durable = durable if durable is not None else open_vectors(
            self.db, sync_commit=settings.links.vector_sync_commit)
        self.app = app if app is not None else create_app(settings)
        # The served models (EMBEDQ_MODELS, else EMBEDQ_MODEL alone), each with one
        # identity per tier. `model`/`revision`/`revisions` name the first listed model
        # and its default tier; a spec's model and revision route its work to the
        # workers that serve it.
        self.catalog = catalog if catalog is not None else Catalog(
            settings, switched=switched_aliases(settings, self.db))
        first = next(iter(self.catalog.models.values()))
        self.model, self.revisions = first.model, first.revisions
        self.revision = first.revisions[first.default_tier]
        self.waiting = Waiting(self.hot, self.durable)
        # A copy in this process saves a round trip only when the hot store is remote.
        self.local = LocalTier.of_mb(settings.worker.local_tier_mb if self.hot.remote else 0)
        self.hot_keys = HotKeys()
        self.counters = CounterWriter(self.hot, self.hot_keys)
        self.executor: Executor = executor if executor is not None else QueueExecutor(
            self.app, settings, self.hot, catalog=self.catalog)

    # --- the request
    def spec(
        self, model: str | None = None, dimensions: int | None = None,
        normalize: bool | None = None, precision: str | None = None,
        tenant: str | None = None,
    ) -> EncodeSpec:
        """The spec a request is fingerprinted with. `model` names a served model (or an
        alias; default: the default model); its tier suffix (`all-MiniLM-L6-v2:int8`) or
        `precision` picks the tier, default the model's first. `tenant` enters it only
        with EMBEDQ_TENANT_ISOLATION=strict (`isolated`)."""
        served, tier = self.resolve(model, precision)
        dims = dimensions if dimensions is not None else self.settings.model.dimensions
        norm = self.settings.model.normalize if normalize is None else normalize
        return EncodeSpec(served.model, served.revisions[tier], dims, norm,
                          tenant=self.isolated(tenant))

    def isolated(self, tenant: str | None) -> str | None:
        """The tenant as fingerprints carry it: itself in strict isolation, else None
        (one exact cache shared by every tenant)."""
        return tenant if self.settings.tenants.isolation == "strict" else None

    def model_name(self, tier: str) -> str:
        """How clients name `tier` of the default model: the bare model for its default
        tier, else `<model>:<tier>`."""
        return self.catalog.default.label(tier)

    def tier_of(self, model: str | None = None, precision: str | None = None) -> str:
        """The served tier a request asks for; UnknownModel/InvalidInput saying what to send."""
        return self.resolve(model, precision)[1]

    def resolve(self, model: str | None = None,
                precision: str | None = None) -> tuple[ServedModel, str]:
        """The served model and tier a request asks for (a tier suffix on `model`, or
        `precision`, else the model's default tier); UnknownModel/InvalidInput saying
        what to send."""
        served, suffix = self.catalog.split(model)
        if suffix is not None and precision is not None and suffix != precision:
            raise InvalidInput(
                f"model suffix {suffix!r} and precision {precision!r} disagree: "
                "send one of them", "precision",
            )
        tier = suffix if suffix is not None else precision
        if tier is None:
            tier = served.default_tier
        listed = ", ".join(served.tiers)
        where = f"the tiers of {served.name} in EMBEDQ_MODELS" if self.catalog.several \
            else "EMBEDQ_TIERS"
        if tier not in TIERS:
            raise InvalidInput(
                f"precision {tier!r} is unknown: use one of {listed} "
                f"(the tiers this deployment serves, {where})", "precision",
            )
        if tier not in served.revisions:
            error = UnknownModel if suffix is not None else InvalidInput
            raise error(
                f"precision tier {tier!r} is not served here ({where}={listed}): use "
                f"one of {listed}, or have the operator add {tier} to {where}",
                "model" if suffix is not None else "precision",
            )
        return served, tier

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
        group: RequestGroup | None = None,
        tokens: list[int] | None = None,
    ) -> EmbedResult:
        """`group`: the requests `texts` came from (one by default), which the API tells
        when one goes away; the call returns early once every one has gone. `tokens`: each
        text's token count where the caller counted them (the API does, for its limits),
        so the misses are queued in messages of like length without counting again."""
        spec = self.spec(model, dimensions, normalize, precision, tenant)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InvalidInput(f"input {i} is not a string", "input")
            if not t:
                raise InvalidInput(f"input {i} is an empty string: send non-empty text", "input")
        fps = [fingerprint(spec, t) for t in texts]
        self.hot_keys.offer("fingerprint", fps)
        text_of = dict(zip(fps, texts, strict=True))
        unique = list(text_of)
        found = self._lookup(unique)
        misses = [fp for fp in unique if fp not in found]
        deadline = time.monotonic() + (timeout_s or self.settings.queue.request_timeout_s)
        group = group if group is not None else RequestGroup.single(len(texts))
        group.bind(fps, deadline)
        won, lost = self._claim(misses, group)
        started = time.perf_counter()
        settled = self.executor.start(
            spec, shortest_first([(fp, text_of[fp]) for fp in won],
                                 dict(zip(fps, tokens, strict=True)) if tokens else None),
            Ticket(group.owner, group), deadline) if won else {}
        answers = self._collect(spec, [fp for fp in won + lost if fp not in settled],
                                text_of, deadline, group)
        answers.update(settled)
        self.local.put_many({fp: v for fp, v in answers.items() if isinstance(v, bytes)})
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
            "cache_hits_local": sum(1 for src, _ in found.values() if src == "local"),
            "cache_hits_hot": sum(1 for src, _ in found.values() if src == "hot"),
            "cache_hits_durable": sum(1 for src, _ in found.values() if src == "durable"),
            "coalesced": len(texts) - len(set(fps)) + len(lost),
            "submitted": len(won),
            "tokens_saved": _tokens_saved(fps, texts, won),
            "calls_saved": 0 if won else requests,
        }
        # Behind the answer: it does not wait for the write.
        self.counters.add({**counts, **stages.take()})
        if won:
            failed = sum(1 for fp in won if isinstance(answers[fp], EmbedqError))
            log.info("leader finish: %d fingerprints (%d failed) cost_ms=%.1f",
                     len(won), failed, cost_ms)
        if lost:
            log.info("waiters resolved: %d fingerprints joined work in flight (%.1f ms)",
                     len(lost), cost_ms)
        return counts

    # --- steps
    @stages.timed("lookup")
    def _lookup(self, fps: list[str]) -> dict[str, tuple[str, bytes]]:
        """Exact cache: this process's memory tier, one MGET, then one durable query for
        the rest; what the stores had is kept in the memory tier."""
        found = {fp: ("local", blob) for fp, blob in self.local.get_many(fps).items()}
        rest = [fp for fp in fps if fp not in found] if found else fps
        if not rest:
            return found
        hot = {fp: blob for fp, blob in zip(rest, self.hot.vectors(rest), strict=True)
               if blob is not None}
        found.update({fp: ("hot", blob) for fp, blob in hot.items()})
        rest = [fp for fp in rest if fp not in hot]
        stored = self.durable.get_many(rest) if rest else {}
        if stored:
            self.hot.put_vectors(stored, self.settings.worker.hot_ttl_s)
            found.update({fp: ("durable", blob) for fp, blob in stored.items()})
        self.local.put_many({**hot, **stored})
        return found

    @stages.timed("claims")
    def _claim(self, fps: list[str], group: RequestGroup) -> tuple[list[str], list[str]]:
        if not fps:
            return [], []
        claimed = self.hot.claim(fps, group.owner, self.settings.queue.claim_ttl_ms,
                                 group.interest(fps))
        return claimed.won, claimed.lost

    def _collect(self, spec: EncodeSpec, fps: list[str], text_of: dict[str, str],
                 deadline: float, group: RequestGroup) -> dict[str, bytes | EmbedqError]:
        """Wait for each fingerprint's outcome. A store outage is ridden out until the
        deadline; a claim that vanished with no vector (dead leader, a restarted empty
        broker) is claimed and queued again, unless no request still here wants it. A
        request that leaves has its interest withdrawn, and what no request still here
        wants is no longer waited for (answered as timed out: nobody reads it)."""
        answers: dict[str, bytes | EmbedqError] = {}
        pending = fps
        while pending:
            with stages.timed("wait"):
                got = self.waiting.wait(pending, REQUEST, deadline=deadline, group=group)
            answers.update(got.vectors)
            answers.update(got.failures)
            if not got.orphans:
                for fp in got.pending:
                    answers[fp] = got.outage or EmbeddingTimeout(
                        "no vector within the request timeout; the work stays queued, "
                        "retry the request to collect it")
                break
            won, _ = self._claim(group.wanted(got.orphans), group)
            if won:
                log.warning("re-queueing %d fingerprints whose claim expired", len(won))
                # Their vectors arrive like any other (the claim is freed once stored).
                self.executor.start(spec, [(fp, text_of[fp]) for fp in won],
                                    Ticket(group.owner, group), deadline)
            pending = got.orphans + got.pending
        return answers

    def warm_up(self) -> None:
        """Open now what a first request opens on its way (the hot store's and Postgres'
        connections, the broker's, with Celery's lazily loaded parts): a process that
        serves as soon as it starts, a new replica, answers its first requests as fast
        as later ones. A store that is down is logged and left to the first request."""
        probe = ["0" * 64]  # no fingerprint is all zeros: two lookups that find nothing
        try:
            self.hot.vectors(probe)
            self.durable.get_many(probe)
            self.executor.warm_up()
        except Unavailable as exc:
            log.warning("warm-up: %s; the first request will connect", exc)

    # --- introspection
    def stats(self) -> dict[str, int]:
        self.counters.flush()  # this process's requests are in what it reads
        return self.hot.counters()

    def close(self) -> None:
        self.counters.close()
        if self._owns_durable:
            self.durable.close()
        self.db.dispose()


def shortest_first(pairs: list[tuple[str, str]], tokens: dict[str, int] | None
                   ) -> list[tuple[str, str]]:
    """Claimed (fingerprint, text) pairs by length, shortest first: by `tokens` where the
    caller counted them, else by characters. The queue cuts them into messages in this
    order, a worker cuts its batches from the messages it holds, and a batch is padded to
    its longest text: 250 held-out texts in messages of 64 padded to 1.94 tokens a token
    in input order, 1.67 by characters, 1.26 by tokens (a bare encode sorting the whole
    corpus into batches of 32: 1.03)."""
    if tokens is not None:
        return sorted(pairs, key=lambda pair: tokens.get(pair[0], 0))
    return sorted(pairs, key=lambda pair: len(pair[1]))


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
