"""GET /metrics: Prometheus text, from this process and from the whole cluster.

Two sources:
  - this API process: HTTP requests by route, method and status, their latency, and
    inputs truncated (prometheus-client metrics; with `serve --workers N` they are shared
    by the N processes through PROMETHEUS_MULTIPROC_DIR);
  - the cluster, read at scrape time by `ClusterCollector`: the hot store's counters
    (texts, cache hits by tier, coalesced, encoded texts, batches, failures...), the
    histograms workers record per batch (batch texts, batch tokens, encode seconds),
    queue depth per queue, jobs by status, semantic-cache lookups and served hits by
    feedback from the database, and the hot namespaces (hot_keys.py);
  - this process's semantic replica (`embedq_semantic_replica_*`: namespaces, entries and
    bytes held, its budget, loads and evictions; residency.py).
A part that cannot be read (a server down) is left out of that scrape, and counted in
`embedq_scrape_errors_total{part}`; the rest is still answered.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from sqlalchemy import text
from starlette.types import ASGIApp, Receive, Scope, Send

from embedq.api.asgi import StatusRecorder
from embedq.api.depth import QueueDepth
from embedq.coordination.hot_keys import KINDS, hot_namespaces
from embedq.coordination.store import served_revisions
from embedq.errors import EmbedqError
from embedq.semantic.feedback import served_hits
from embedq.service import EmbeddingService

if TYPE_CHECKING:
    from embedq.semantic.service import SemanticCache

log = logging.getLogger("embedq.api")

# Hot-store counters with a name or labels of their own; every other counter is exported
# as embedq_<name>_total, so counters added by other features appear without code here.
_RENAMED = {
    "encoded": ("embedq_encoded_texts", "texts encoded by a model (forward passes)", {}),
    "requests": ("embedq_embedding_requests",
                 "embedding requests served (HTTP requests, client and tool calls)", {}),
    "lookups": ("embedq_lookups",
                "service calls (the API makes one per coalesced group of requests)", {}),
    "cache_hits_hot": ("embedq_cache_hits", "inputs answered from a cache store",
                       {"tier": "hot"}),
    "cache_hits_durable": ("embedq_cache_hits", "inputs answered from a cache store",
                           {"tier": "durable"}),
    "cache_hits_local": ("embedq_cache_hits", "inputs answered from a cache store",
                         {"tier": "local"}),
    "cache_hits": ("embedq_cache_hits_all", "inputs answered from any exact cache store", {}),
}
_HISTOGRAM_HELP = {
    "batch_texts": "distinct texts per model batch (all workers)",
    "batch_tokens": "padded tokens per model batch (all workers)",
    "encode_seconds": "model time per batch, from encode start to its write (all workers)",
}
_NAME = re.compile(r"[^a-zA-Z0-9_]")
# The server each part of a scrape reads: a part that fails marks its server down.
_DEPENDS_ON = {
    "counters": "hot_store", "histograms": "hot_store", "workers": "hot_store",
    "queues": "broker", "jobs": "database", "semantic": "database", "hot_keys": "hot_store",
    "replica": "database",
}


class ClusterCollector(Collector):
    def __init__(self, service: EmbeddingService, depth: QueueDepth,
                 semantic: Callable[[], SemanticCache | None] | None = None) -> None:
        """`semantic` answers this process's semantic cache, once it has started."""
        self.service = service
        self.depth = depth
        self.semantic = semantic
        self.errors: dict[str, int] = {}

    def collect(self) -> Iterator[Metric]:
        down: set[str] = set()
        for part, produce in (
            ("counters", self._counters),
            ("histograms", self._histograms),
            ("workers", self._workers),
            ("queues", self._queues),
            ("jobs", self._jobs),
            ("semantic", self._semantic),
            ("hot_keys", self._hot_keys),
            ("replica", self._replica),
        ):
            try:
                yield from list(produce())
            except EmbedqError as exc:
                self.errors[part] = self.errors.get(part, 0) + 1
                down.add(_DEPENDS_ON[part])
                log.warning("metrics: %s left out of this scrape: %s", part, exc)
        up = GaugeMetricFamily(
            "embedq_dependency_up", "1 if this scrape could read the server, else 0",
            labels=["dependency"],
        )
        for dependency in sorted(set(_DEPENDS_ON.values())):
            up.add_metric([dependency], 0 if dependency in down else 1)
        yield up
        failures = CounterMetricFamily(
            "embedq_scrape_errors", "parts of /metrics that could not be read", labels=["part"]
        )
        for part in sorted(_DEPENDS_ON):  # every part, 0 until it fails: rate() needs a start
            failures.add_metric([part], self.errors.get(part, 0))
        yield failures

    def _counters(self) -> Iterator[Metric]:
        families: dict[str, CounterMetricFamily] = {}
        counts = {"cache_hits_local": 0, "cache_hits_hot": 0, "cache_hits_durable": 0,
                  **self.service.stats()}
        for name, value in sorted(counts.items()):
            metric, help_, labels = _RENAMED.get(
                name, (f"embedq_{_NAME.sub('_', name)}", f"cluster-wide counter {name!r}", {})
            )
            family = families.get(metric)
            if family is None:
                family = CounterMetricFamily(metric, help_, labels=list(labels))
                families[metric] = family
            family.add_metric(list(labels.values()), value)
        yield from families.values()

    def _histograms(self) -> Iterator[Metric]:
        for name, snap in sorted(self.service.hot.histograms().items()):
            cumulative = 0
            buckets: list[tuple[str, float]] = []
            for bound, n in zip((*snap.bounds, float("inf")), snap.buckets, strict=True):
                cumulative += n
                buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)),
                                cumulative))
            yield HistogramMetricFamily(
                f"embedq_{name}", _HISTOGRAM_HELP.get(name, name), buckets=buckets,
                sum_value=snap.total,
            )

    def _workers(self) -> Iterator[Metric]:
        """Workers with a fresh heartbeat, by the model and revision (tier) they serve; each
        of this deployment's models' tiers is always there (0 when none serves it), so an alert can
        test it for zero."""
        served = {(m.model, r): 0 for m in self.service.catalog.models.values()
                  for r in m.revisions.values()}
        busy = GaugeMetricFamily(
            "embedq_model_busy_share", "the share of a worker's last heartbeat interval "
            "its models spent in forward passes (near 1: the model is what limits it)",
            labels=["worker"])
        for worker, info in sorted(self.service.hot.live_workers().items()):
            for revision in served_revisions(info):  # a worker counts once per tier
                key = (str(info.get("model")), revision)
                served[key] = served.get(key, 0) + 1
            share = info.get("model_busy_share")
            if isinstance(share, int | float):
                busy.add_metric([worker], float(share))
        family = GaugeMetricFamily(
            "embedq_live_workers", "workers with a fresh heartbeat, by model and revision",
            labels=["model", "revision"],
        )
        for (model, revision), n in sorted(served.items()):
            family.add_metric([model, revision], n)
        yield family
        yield busy

    def _queues(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "embedq_queue_depth", "messages waiting on the broker per queue", labels=["queue"]
        )
        for queue, n in self.depth.probe_all().items():
            family.add_metric([queue], n)
        yield family

    def _jobs(self) -> Iterator[Metric]:
        db = self.service.db
        if not db.has_tables("jobs"):
            return
        with db.session() as s:
            rows = s.execute(text("SELECT status, count(*) FROM jobs GROUP BY status")).all()
        family = GaugeMetricFamily("embedq_jobs", "jobs by status", labels=["status"])
        for status, n in rows:
            family.add_metric([str(status)], int(n))
        yield family

    def _semantic(self) -> Iterator[Metric]:
        db = self.service.db
        if not db.has_tables("semantic_namespaces"):
            return
        with db.session() as s:
            hits, misses = s.execute(text(
                "SELECT coalesce(sum(hits), 0), coalesce(sum(misses), 0) FROM semantic_namespaces"
            )).one()
        # Dropping a namespace lowers the sums: Prometheus reads that as a counter reset.
        family = CounterMetricFamily(
            "embedq_semantic_lookups", "semantic-cache lookups by result, all namespaces",
            labels=["result"],
        )
        family.add_metric(["hit"], int(hits))
        family.add_metric(["miss"], int(misses))
        yield family
        if not db.has_tables("semantic_hits"):
            return
        served = GaugeMetricFamily(
            "embedq_semantic_served_hits", "semantic-cache hits served within their feedback "
            "window (EMBEDQ_SEMANTIC_FEEDBACK_TTL_S), all namespaces, by the feedback given "
            "(none: unverified)", labels=["feedback"])
        counts = served_hits(db, datetime.now(UTC))
        for label, key in (("correct", "correct"), ("wrong", "wrong"), ("none", "unverified")):
            served.add_metric([label], counts[key])
        yield served
        yield GaugeMetricFamily(
            "embedq_semantic_served_over_trust", "of those, the hits served over a "
            "namespace's trust score (a conflict the verifier's model-judged slots found)",
            counts["over_trust"])


    def _hot_keys(self) -> Iterator[Metric]:
        """This process's memory tier, and the cluster's hottest keys (decayed asks)."""
        local = self.service.local.stats()
        for name, help_ in (("entries", "vectors held"), ("bytes", "bytes of vectors held"),
                            ("max_bytes", "bound (EMBEDQ_LOCAL_TIER_MB)")):
            yield GaugeMetricFamily(f"embedq_local_tier_{name}",
                                    f"this process's memory tier: {help_}", local[name])
        for name in ("hits", "misses", "evictions"):
            yield CounterMetricFamily(f"embedq_local_tier_{name}",
                                      f"this process's memory tier: {name}", local[name])
        family = GaugeMetricFamily(
            "embedq_hot_key_asks", "the hottest fingerprints and semantic namespaces: asks "
            "summed over the processes, halving every 5 minutes", labels=["kind", "key"])
        merged = self.service.hot.hot_keys()
        for kind, entries in sorted(merged.items()):
            if kind in KINDS:
                for key, count in entries:
                    family.add_metric([kind, key], round(count, 1))
        yield family
        per_s = self.service.settings.semantic.hot_lookups_per_s
        hot = GaugeMetricFamily(
            "embedq_semantic_hot_namespace_lookups_per_second", "semantic namespaces looked "
            f"up more than EMBEDQ_SEMANTIC_HOT_LOOKUPS_PER_S ({per_s:g}) times a second, "
            "summed over the processes (at most 20)", labels=["namespace"])
        for namespace, rate in hot_namespaces(merged, per_s):
            hot.add_metric([namespace], round(rate, 3))
        yield hot

    def _replica(self) -> Iterator[Metric]:
        """This process's semantic replica: what it holds against its budget."""
        cache = self.semantic() if self.semantic is not None else None
        if cache is None:
            return
        held = cache.sync.memory()
        for name, help_ in (
            ("namespaces", "namespaces held in memory"),
            ("entries", "vectors held"),
            ("bytes", "bytes held (indexes, and 4 KiB a namespace)"),
            ("budget_bytes", "the budget (EMBEDQ_SEMANTIC_MEMORY_MB)"),
        ):
            yield GaugeMetricFamily(f"embedq_semantic_replica_{name}",
                                    f"this process's semantic indexes: {help_}", held[name])
        for name, help_ in (("loads", "namespaces loaded (first use, or after eviction)"),
                            ("evictions", "namespaces dropped past the budget")):
            yield CounterMetricFamily(f"embedq_semantic_replica_{name}",
                                      f"this process's semantic indexes: {help_}", held[name])


class ApiMetrics:
    """This process's metrics plus the cluster collector, rendered per scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "embedq_http_requests", "HTTP requests by route, method and status",
            ["route", "method", "status"], registry=self.registry,
        )
        self.latency = Histogram(
            "embedq_http_request_seconds", "HTTP request latency by route", ["route"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.truncated = Counter(
            "embedq_truncated_inputs", "inputs longer than the model's window, truncated",
            registry=self.registry,
        )
        self._cluster: ClusterCollector | None = None

    def attach(self, cluster: ClusterCollector) -> None:
        self._cluster = cluster

    def render(self) -> bytes:
        registry: Any = self.registry
        multiproc = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if multiproc:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry, path=multiproc)  # type: ignore[no-untyped-call]
        cluster = CollectorRegistry()
        if self._cluster is not None:
            cluster.register(self._cluster)
        return bytes(generate_latest(registry) + generate_latest(cluster))


class MetricsMiddleware:
    """Counts every HTTP request by its route template (not its raw path) and status."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        recorder = StatusRecorder(send)
        try:
            await self.app(scope, receive, recorder)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.requests.labels(route, scope["method"], str(recorder.status)).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - started)
