"""`embedq bench dify`: embedq called the way Dify calls an embedding service.

Phases, in this order, each on texts of its own (the held-out corpus split, salted afresh
each run, so no phase is answered from cache unless it says so):
  a. credential check: POST /v1/embeddings `{"input": "ping"}`, what Dify sends when a
     model is added (the same text every run: after the first run it is a cache hit);
  b. OpenAI pattern (Dify indexing through its OpenAI-compatible provider): N texts, one
     text per request (the provider's max_chunks=1), from THREADS threads (the indexing
     runner's 10), each thread with its own keep-alive httpx client;
  c. TEI pattern (Dify indexing through its TEI plugin): GET /info once for
     max_client_batch_size (the plugin reads it when the model is added, and keeps it),
     then from each of the same THREADS threads POST /v1/embeddings `{"input": [...]}`
     in batches of at most max_client_batch_size; N texts. The plugin counts tokens
     itself (GPT-2's tokenizer) and cuts a text at or over max_input_length by its share
     of characters; the texts go whole here (that tokenizer is not bundled, and the
     server cuts at the model's window anyway);
  d. sequential one-text misses (Dify embedding a query): M texts, one request at a time;
  e. bare encode, in this process, on the texts of (b) and (d): the encoder's own batched
     `encode` (SentenceTransformer.encode at its default batch size) and one-text `encode`
     (dify_bare.py).

The bare encode runs after the server phases, once the processes this bench started are
stopped: the bench process then holds no model while the server phases run (the client
costs what Dify's would, and on a 2-core machine no idle torch threads compete with the
worker), and the bare encode has the cores to itself. With `--url` the target server keeps
running; it is idle by then.

Threads split the texts as Dify's indexing runner does: by a hash of each text, modulo
THREADS (so the groups are uneven, as they are there).

Unless `--url` names a running server, it starts an `embedq serve` on a free loopback
port with a temporary API key, and an `embedq worker` when no live worker serves the
configured model (the heartbeat check of `bench bulk --via-jobs`), on this EMBEDQ_*
environment, which must name Redis and Postgres (embedq.bench.cluster). Every request has
a timeout, and the first failed one ends the bench.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from embedq.bench.cluster import Target, cluster
from embedq.bench.dify_bare import bare_phases
from embedq.bench.stats import percentile, proc_cpu_s
from embedq.config import Settings
from embedq.corpus import load_texts
from embedq.errors import ConfigError, Unavailable

CORPUS = "embedq/data/debian-heldout.jsonl.gz (held-out split: no setting was tuned on it)"


class PhaseFailed(Unavailable):
    """A request of a phase failed: the bench stops instead of reporting a partial figure."""


# --- the client side: what Dify sends
class _Stopped(Exception):
    """Another thread of the phase failed; this one stops at its next request."""


@dataclass
class Tally:
    """One phase's requests, from all its threads: latencies, vectors back, their widths."""

    latencies: list[float] = field(default_factory=list)
    vectors: int = 0
    widths: set[int] = field(default_factory=set)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    routes: Counter[str] = field(default_factory=Counter)  # "POST /v1/embeddings": n
    largest: int = 0  # the most texts one request sent
    client_cpu_s: float = 0.0  # this process's CPU during the phase (all its threads)
    server_cpu_s: float | None = None  # the processes the bench started (None: unknown)

    def request(self, client: httpx.Client, path: str, body: dict[str, Any] | None,
                sent: int = 0) -> Any:
        """One request; its vectors (`sent` expected; 0: no vectors) checked and counted."""
        if self.stop.is_set():
            raise _Stopped
        started = time.perf_counter()
        resp = client.post(path, json=body) if body is not None else client.get(path)
        ms = (time.perf_counter() - started) * 1000
        with self.lock:
            self.routes[f"{resp.request.method} {path}"] += 1
        if resp.status_code != 200:
            raise PhaseFailed(f"{resp.request.method} {path}: {resp.status_code} "
                              f"{resp.text[:300]}")
        answer = resp.json()
        if sent:
            rows = [d["embedding"] for d in answer["data"]] if path == "/v1/embeddings" \
                else answer
            if len(rows) != sent or any(not row for row in rows):
                raise PhaseFailed(f"POST {path}: {sent} texts sent, {len(rows)} vectors back")
            with self.lock:
                self.latencies.append(ms)
                self.vectors += len(rows)
                self.largest = max(self.largest, sent)
                self.widths.update(len(row) for row in rows)
        return answer


def openai_call(tally: Tally, client: httpx.Client, model: str, texts: list[str]) -> None:
    # The body Dify's OpenAI-compatible provider sends (plus `user` when it has one).
    tally.request(client, "/v1/embeddings",
                  {"input": texts, "model": model, "encoding_format": "float"}, len(texts))


def tei_batches(batch: int) -> Callable[[Tally, httpx.Client, list[str]], None]:
    """A Dify TEI-plugin indexing call: its texts to /v1/embeddings in batches of at
    most `batch` (max_client_batch_size), the body its helper sends (no model: the one
    served)."""

    def call(tally: Tally, client: httpx.Client, texts: list[str]) -> None:
        for start in range(0, len(texts), batch):
            part = texts[start:start + batch]
            tally.request(client, "/v1/embeddings", {"input": part}, len(part))

    return call


def tei_info(target: Target, tally: Tally) -> int:
    """GET /info, once, as the plugin does when the model is added: max_client_batch_size."""
    with httpx.Client(base_url=target.url, headers=target.headers,
                      timeout=target.timeout_s) as client:
        info = tally.request(client, "/info", None)
    return int(info["max_client_batch_size"])


def groups(texts: list[str], threads: int) -> list[list[str]]:
    """Dify's indexing runner's split: by a hash of the text, modulo the threads."""
    out: list[list[str]] = [[] for _ in range(threads)]
    for text in texts:
        out[int(hashlib.sha256(text.encode()).hexdigest(), 16) % threads].append(text)
    return [g for g in out if g]


def threaded(target: Target, parts: list[list[str]],
             work: Callable[[Tally, httpx.Client, list[str]], None],
             tally: Tally | None = None) -> tuple[float, Tally]:
    """Each part on its own thread with its own keep-alive client: (seconds, tally; a
    given one holds what came before the timed part). The first failure ends the phase:
    the other threads stop at their next request."""
    tally = tally or Tally()

    def one(part: list[str]) -> None:
        with httpx.Client(base_url=target.url, headers=target.headers,
                          timeout=target.timeout_s) as client:
            try:
                work(tally, client, part)
            except BaseException:
                tally.stop.set()
                raise

    started = time.perf_counter()
    cpu_before, server_before = time.process_time(), server_cpu_s(target)
    pool = ThreadPoolExecutor(len(parts), "embedq-bench-dify")
    try:
        futures = [pool.submit(one, part) for part in parts]
        errors = [f.exception() for f in futures]
    finally:
        # On Ctrl-C too: the threads stop at their next request instead of finishing.
        tally.stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
    seconds = time.perf_counter() - started
    tally.client_cpu_s = time.process_time() - cpu_before
    server_after = server_cpu_s(target)
    if server_before is not None and server_after is not None:
        tally.server_cpu_s = server_after - server_before
    first = next((e for e in errors if e is not None and not isinstance(e, _Stopped)), None)
    if first is not None:
        raise first
    return seconds, tally


def server_cpu_s(target: Target) -> float | None:
    """CPU seconds of the processes this bench started and their children; None where
    that cannot be read (a server given by --url, a system without /proc)."""
    if not target.started:
        return None
    return proc_cpu_s(target.started.values(), descendants=True)


def phase(target: Target, texts: list[str], seconds_tally: tuple[float, Tally],
          before: dict[str, int] | None) -> dict[str, Any]:
    """A phase's figures; PhaseFailed unless every text came back as one vector of one
    width. `encoded`: texts the cluster's workers encoded meanwhile (None: unknown)."""
    seconds, tally = seconds_tally
    if tally.vectors != len(texts) or len(tally.widths) != 1:
        raise PhaseFailed(f"{len(texts)} texts sent, {tally.vectors} vectors back, of "
                          f"widths {sorted(tally.widths)}")
    encoded = batches = None
    if target.counters is not None and before is not None:
        after = target.counters()
        encoded = after.get("encoded", 0) - before.get("encoded", 0)
        batches = after.get("batches", 0) - before.get("batches", 0)
    per_text = 1000 / max(1, len(texts))
    return {"texts": len(texts), "requests": len(tally.latencies), "vectors": tally.vectors,
            "client_cpu_ms_per_text": _sig(tally.client_cpu_s * per_text),
            "server_cpu_ms_per_text": _sig(tally.server_cpu_s * per_text)
            if tally.server_cpu_s is not None else None,
            "dimension": tally.widths.pop(), "seconds": round(seconds, 3),
            "texts_per_s": round(len(texts) / seconds, 1),
            "p50_ms": round(percentile(tally.latencies, 50), 2),
            "p99_ms": round(percentile(tally.latencies, 99), 2), "encoded": encoded,
            "routes": dict(tally.routes), "largest_request": tally.largest,
            "model_batches": batches,
            "texts_per_batch": round(encoded / batches, 2) if encoded and batches else None}


# --- the bench
def served_model(target: Target) -> str:
    """The model name a Dify user would configure: the first that GET /v1/models lists."""
    resp = httpx.get(target.url + "/v1/models", headers=target.headers, timeout=30)
    if resp.status_code != 200:
        raise PhaseFailed(f"GET /v1/models: {resp.status_code} {resp.text[:300]}")
    return str(resp.json()["data"][0]["id"])


def server_phases(target: Target, texts: dict[str, list[str]], threads: int
                  ) -> dict[str, Any]:
    counters = target.counters or (lambda: {"encoded": 0})
    model = served_model(target)
    out: dict[str, Any] = {"model": model}
    before = counters()
    with httpx.Client(base_url=target.url, headers=target.headers,
                      timeout=target.timeout_s) as client:
        tally = Tally()
        started = time.perf_counter()
        # Dify's credential check sends one string, not a list.
        tally.request(client, "/v1/embeddings", {"model": model, "input": "ping"}, 1)
        out["credential_check"] = phase(target, ["ping"], (time.perf_counter() - started,
                                                           tally), before)
    def one_text_each(tally: Tally, client: httpx.Client, part: list[str]) -> None:
        for text in part:
            openai_call(tally, client, model, [text])

    before = counters()
    out["openai"] = phase(target, texts["openai"], threaded(
        target, groups(texts["openai"], threads), one_text_each), before)
    before = counters()
    tei = Tally()
    batch = tei_info(target, tei)
    out["tei"] = phase(target, texts["tei"], threaded(
        target, groups(texts["tei"], threads), tei_batches(batch), tei), before)
    out["tei"]["max_client_batch_size"] = batch
    before = counters()
    out["sequential"] = phase(target, texts["sequential"], threaded(
        target, [texts["sequential"]], one_text_each), before)
    return out


def phase_texts(n: int, m: int) -> dict[str, list[str]]:
    """N texts for (b) and (c) and the first M for (d), the same corpus lines in each (so
    the phases compare like with like), each made unique by a salt of its own. The salt
    goes in front: a client that cuts long texts cuts them at the end, never the salt."""
    base = load_texts(max(n, m), split="heldout")
    run_id = uuid.uuid4().hex[:8]
    return {name: [f"[{run_id}-{name[0]}{i}] {t}" for i, t in enumerate(base[:size])]
            for name, size in (("openai", n), ("tei", n), ("sequential", m))}


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.texts < 1 or args.sequential < 1 or args.threads < 1:
        raise ConfigError("--texts, --sequential and --threads must be at least 1")
    settings = Settings.from_env()
    texts = phase_texts(args.texts, args.sequential)
    with tempfile.TemporaryDirectory(prefix="embedq-bench-dify-") as tmp:
        if args.url:
            headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
            target = Target(args.url.rstrip("/"), headers, settings.queue.request_timeout_s + 30)
            report = server_phases(target, texts, args.threads)
        else:
            with cluster(settings, Path(tmp)) as target:
                report = server_phases(target, texts, args.threads)
    # Here, not earlier: see the module docstring.
    # The bare model at its own best, whatever threads an encoding API is given.
    bare = bare_phases(settings.with_overrides(model_threads=0), texts["openai"],
                       texts["sequential"], report["openai"]["texts_per_batch"])
    report.update({
        "corpus": CORPUS, "threads": args.threads,
        "target": args.url or _started(settings, target),
        "started": target.started, "bare": bare,
        "openai_over_bare_batched": _ratio(report["openai"]["texts_per_s"],
                                           bare["batched_texts_per_s"]),
        "tei_over_bare_batched": _ratio(report["tei"]["texts_per_s"],
                                        bare["batched_texts_per_s"]),
        "tei_over_openai": _ratio(report["tei"]["texts_per_s"], report["openai"]["texts_per_s"]),
        "openai_over_bare_at_formed_batch": _ratio(report["openai"]["texts_per_s"],
                                                   bare["formed_batch_texts_per_s"] or 0)
        if bare["formed_batch_texts_per_s"] else None,
        "sequential_p50_over_bare_one_text_p50": _ratio(report["sequential"]["p50_ms"],
                                                        bare["one_text_p50_ms"]),
        "cpu": cpu_budget(report["openai"], bare),
    })
    _print(report)
    return report


def cpu_budget(openai: dict[str, Any], bare: dict[str, Any]) -> dict[str, Any]:
    """Where phase (b)'s CPU went, per text, and the most (b) can reach on these cores.

    The bare batched encode keeps every core busy, so the model needs at least
    cores / (bare batched texts/s) of CPU a text. The client needs what it used in (b)
    (Dify's indexer costs its host about as much). Whatever the server adds, (b) can
    go no faster than cores / (model + client): over bare batched, model / (model +
    client). A target above that ceiling is out of reach on this machine with this
    client running on it, however little the server costs."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    model_ms = cores * 1000 / max(bare["batched_texts_per_s"], 1e-9)
    at_formed = bare.get("formed_batch_texts_per_s")
    client_ms = openai["client_cpu_ms_per_text"]
    return {
        "cores": cores,
        "bare_model_ms_per_text": _sig(model_ms),
        "bare_model_at_formed_batch_ms_per_text":
            _sig(cores * 1000 / at_formed) if at_formed else None,
        "client_ms_per_text": client_ms,
        "server_ms_per_text": openai["server_cpu_ms_per_text"],
        "openai_ceiling_over_bare_batched": _ratio(model_ms, model_ms + client_ms),
    }


def _started(settings: Settings, target: Target) -> str:
    if settings.queue.online_encode == "local":
        return "started here: embedq serve encoding its online misses (EMBEDQ_ONLINE_ENCODE=local)"
    worker = "embedq worker" if "worker" in target.started else "a live worker"
    return f"started here: embedq serve + {worker} (EMBEDQ_ONLINE_ENCODE=queue)"


def _ratio(a: float, b: float) -> float:
    """a / b to 4 significant figures (a fast test encoder makes ratios far below 0.001)."""
    return _sig(a / max(b, 1e-9))


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


def _print(r: dict[str, Any]) -> None:
    b, o, t, s = r["bare"], r["openai"], r["tei"], r["sequential"]
    formed = at_formed = ""
    if o.get("texts_per_batch"):
        formed = f"; the model ran {o['texts_per_batch']:.1f} texts per batch"
    if r.get("openai_over_bare_at_formed_batch"):
        at_formed = (f"\n  bare encode in batches of {max(1, round(b['formed_batch']))} (the size "
                     f"(b) formed): {b['formed_batch_texts_per_s']:.1f} texts/s; (b) over it "
                     f"{r['openai_over_bare_at_formed_batch']:.3g}")
    print(
        f"bench dify: model {r['model']}, {r['threads']} threads; target {r['target']}\n"
        f"  texts: {r['corpus']}\n"
        f"  (a) credential check (\"ping\"): {r['credential_check']['p50_ms']:.1f} ms\n"
        f"  (b) OpenAI route, one text per request: {o['texts']} texts, "
        f"{o['texts_per_s']:.1f} texts/s (p50 {o['p50_ms']:.1f} ms, p99 {o['p99_ms']:.1f} ms)"
        f"{formed}\n"
        f"  (c) TEI plugin, /info once, then /v1/embeddings in batches of at most "
        f"{t['max_client_batch_size']}: {t['texts']} texts, {t['texts_per_s']:.1f} texts/s "
        f"({t['requests']} requests, p50 {t['p50_ms']:.1f} ms)\n"
        f"  (d) sequential one-text misses: {s['texts']} texts, p50 {s['p50_ms']:.1f} ms, "
        f"p99 {s['p99_ms']:.1f} ms\n"
        f"  bare {b['encode']}, after the server phases (best of torch threads "
        f"{'/'.join(str(x['threads']) for x in b['by_threads'])}): batched "
        f"{b['batched_texts_per_s']:.1f} texts/s, one text p50 {b['one_text_p50_ms']:.2f} ms\n"
        f"  ratios: (b)/bare batched {r['openai_over_bare_batched']:.3g}, (c)/bare batched "
        f"{r['tei_over_bare_batched']:.3g}, (c)/(b) {r['tei_over_openai']:.3g}, "
        f"(d) p50 / bare one-text p50 {r['sequential_p50_over_bare_one_text_p50']:.3g}"
        f"{at_formed}\n{_cpu_line(r['cpu'])}"
    )


def _cpu_line(c: dict[str, Any]) -> str:
    server = "the server's unknown (not started here)"
    if c["server_ms_per_text"] is not None:
        server = f"the server {c['server_ms_per_text']:.2f} ms"
        if c["bare_model_at_formed_batch_ms_per_text"]:
            server += (f" (the bare model at the size (b) formed needs "
                       f"{c['bare_model_at_formed_batch_ms_per_text']:.2f} ms)")
    return (f"  CPU a text in (b): this client {c['client_ms_per_text']:.2f} ms, {server}; "
            f"the bare model at its best needs {c['bare_model_ms_per_text']:.2f} ms on "
            f"{c['cores']} cores, so with this client on them (b) can reach at most "
            f"{c['openai_ceiling_over_bare_batched']:.3g} of bare batched")
