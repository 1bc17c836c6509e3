"""`embedq bench`: speed figures as ratios to a baseline measured in the same run.

    bulk.py      `embedq bench bulk`: Client.embed over the corpus against bare encode
    jobs.py      `embedq bench bulk --via-jobs`: `embedq bulk` end to end, online latency
    http.py      `embedq bench http`: the HTTP API under 50 concurrent clients
    dify.py      `embedq bench dify`: the requests Dify sends (OpenAI and TEI providers)
    dify_bare.py its bare-model phase, the baseline the requests are measured against
    coalesce.py  `embedq bench coalesce`: a slow upstream, with and without embedq
    semantic.py  `embedq bench semantic`: the semantic cache's index at size
    semantic_replica.py  `embedq bench semantic --writers | --replica`: concurrent tenants' puts,
                 namespace loads (table, snapshot)
    backends.py  `embedq bench backends`: torch against ONNX Runtime fp32 and int8
    served.py    its `--through-serve`: the int8 tier through `embedq serve` against bare
    gpu.py       `embedq bench gpu`: fp16 and fp32 on a CUDA GPU, the index at 1M entries
    threshold.py `embedq bench threshold`: the semantic threshold's table, tune and held-out
    lodo.py      its `--lodo`: the rules, leave-one-domain-out, with Wilson intervals
    lookup_cost.py  its cost lines: one verification, a whole lookup with the verifier
                 on and off
    learned.py   its `--learned`: a learned verifier against the rules (`--train-learned`)
    pipeline.py  `embedq bench pipeline`: the pipeline with a free model against its storage
    scale.py     `embedq bench scale`: workers and API replicas added, on an I/O-bound upstream
    scale_cluster.py  `embedq bench scale --cluster`: coordination on a Redis Cluster
    balance.py   `embedq bench balance`: namespaces routed to replicas by HAProxy's bounded
                 loads, against plain hashing and round robin
    haproxy.py   its haproxy on loopback with deploy/haproxy.cfg, and what haproxy counted
    cluster.py   the serve (and worker) a bench starts for itself, and stops
    stats.py     the percentile they all report with

The top layer: it may import anything in embedq; only embedq.cli imports it. Texts come
from the bundled corpus (embedq.corpus) or `--file`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from embedq.argtypes import at_least, device_pace


def add_parser(sub: Any, handler: Any) -> None:
    """`embedq bench NAME [options]`: one subcommand per benchmark, each with only the
    options it reads (`embedq bench NAME --help`)."""
    p = sub.add_parser("bench", help="benchmarks (ratios to a same-run baseline)",
                       description="Benchmarks, each a ratio to a baseline measured in the "
                                   "same run; `embedq bench NAME --help` for its options.")
    p.set_defaults(func=handler)
    kinds = p.add_subparsers(dest="kind", metavar="NAME", required=True)
    add = _adder(kinds)

    b = add("bulk", "Client.embed over the corpus against bare encode", n=5000, file=True)
    b.add_argument("--via-jobs", action="store_true",
                   help="through `embedq bulk` (jobs), e.g. --n 20000")
    b.add_argument("--online-rate", type=float, default=10.0,
                   help="with --via-jobs: online requests a second while the job runs")
    h = add("http", "the HTTP API under 50 concurrent one-text clients", n=5000, file=True)
    h.add_argument("--peer", default=None, metavar="URL",
                   help="also send the miss phase's load (other texts, the same client) to "
                        "another OpenAI-compatible server's URL/v1/embeddings, in slices "
                        "alternating with the misses', e.g. "
                        "infinity_emb v2 --engine debugengine --url-prefix /v1")
    d = add("dify", "the requests Dify sends (OpenAI and TEI providers)")
    d.add_argument("--texts", type=at_least(1), default=600,
                   help="texts of each indexing phase (OpenAI route, TEI plugin)")
    d.add_argument("--sequential", type=at_least(1), default=60,
                   help="one-text requests sent one at a time (query embedding)")
    d.add_argument("--threads", type=at_least(1), default=10,
                   help="indexing threads (Dify's indexing runner uses 10)")
    d.add_argument("--url", default=None,
                   help="a running server to target (then nothing is started)")
    d.add_argument("--api-key", default=None, help="with --url: the server's API key")
    add("coalesce", "a slow upstream, with and without embedq", n=5000, file=True)
    _semantic_options(add("semantic", "the semantic cache's index at size", file=True))
    _threshold_options(add("threshold", "the semantic threshold's table, tune and "
                                        "held-out splits"))
    k = add("backends", "torch against ONNX Runtime fp32 and int8", n=5000, file=True)
    k.add_argument("--through-serve", action="store_true",
                   help="instead: the int8 tier through embedq serve (embedded) against "
                        "bare int8 encode on the same texts")
    g = add("gpu", "fp16 and fp32 on a CUDA GPU, the semantic index at 1M entries",
            file=True)
    g.add_argument("--queries", type=at_least(1), default=1000, help="lookups measured")
    g.add_argument("--index-entries", type=at_least(1), default=1_000_000,
                   help="entries in the semantic index built on the GPU")
    g.add_argument("--pipeline-texts", type=at_least(0), default=20_000,
                   help="texts of the bulk job run through the embedded pipeline (0: skip it)")
    g.add_argument("--report", default="docs/gpu-report.md",
                   help="the report written (only after a run on a CUDA device)")
    _add_pipeline(add("pipeline", "the pipeline with a free model against its storage "
                                  "floor", n=5000, file=True))
    _add_scale(add("scale", "throughput as workers and API replicas are added "
                            "(I/O-bound upstream)", file=True))
    _add_balance(add("balance", "semantic-cache namespaces routed to 3 API replicas by "
                                "HAProxy (as shipped, bounded loads only, plain hashing, "
                                "round robin)"))


def _add_pipeline(p: Any) -> None:
    p.add_argument("--rounds", type=at_least(1), default=3,
                   help="online rounds (misses on new texts, then hits); the ratio reported "
                        "is their median")
    p.add_argument("--embedded", action="store_true",
                   help="only a bulk job through the embedded pipeline (SQLite, the "
                        "in-process broker and store, a worker thread: what `make "
                        "gpu-check` runs on a GPU); no servers needed")
    p.add_argument("--device", type=device_pace, default=None, metavar="MS,US",
                   help="with --embedded: the model is a stand-in for a device whose "
                        "forward pass waits MS ms + US us a text with the interpreter lock "
                        "released (e.g. 2,8), in batches of 512; the job is reported over "
                        "that device's bare rate")
    p.add_argument("--vector-writes", action="store_true",
                   help="instead: the table COPY_MIN_ROWS was chosen from (new vectors by "
                        "multi-row INSERT and by COPY, by batch size, on EMBEDQ_DATABASE_URL)")


def _threshold_options(t: Any) -> None:
    """`bench threshold`'s options: the tune table, or (instead) leave-one-domain-out, or
    the learned verifier against the rules."""
    t.add_argument("--pairs-file", default=None,
                   help="the tune split (default tests/data/semantic_pairs.tune.jsonl)")
    t.add_argument("--heldout-file", default=None,
                   help="the held-out split, reported only "
                        "(default tests/data/semantic_pairs.heldout.jsonl)")
    t.add_argument("--lodo", nargs="?", default=None, const="", metavar="FILE",
                   help="leave-one-domain-out figures on FILE's domains instead of the "
                        "tune table (default tests/data/semantic_pairs.domains.jsonl)")
    t.add_argument("--learned", nargs="?", default=None, const="", metavar="FILE",
                   help="the learned verifier against the rules: leave-one-domain-out on "
                        "FILE's domains, then the held-out splits")
    t.add_argument("--train-learned", action="store_true",
                   help="with --learned: write the fit on every domain as the shipped "
                        "weights (embedq/data/learned_verifier.json)")


def _add_balance(c: Any) -> None:
    modes = ["bounded", "bounded-all", "hash", "roundrobin"]  # haproxy.MODES, not imported
    c.add_argument("--namespaces", type=at_least(1), default=200, help="namespaces stored")
    c.add_argument("--entries", type=at_least(1), default=10, help="entries of each namespace")
    c.add_argument("--requests", type=at_least(1), default=5000,
                   help="lookups of each mode, the same draws for every mode")
    c.add_argument("--zipf", type=float, default=1.1,
                   help="the exponent namespaces are drawn with (rank 1 the hottest)")
    c.add_argument("--callers", type=at_least(1), default=24,
                   help="connections sending lookups at once; a multiple of 12 makes 1.25 x "
                        "the mean a whole number of requests per replica")
    c.add_argument("--modes", nargs="+", choices=modes, default=modes,
                   help="how the semantic backend balances, each with fresh replicas")
    c.add_argument("--memory-mb", type=at_least(1), default=None,
                   help="each replica's EMBEDQ_SEMANTIC_MEMORY_MB (default: the setting's)")
    c.add_argument("--no-reference", action="store_true",
                   help="skip the replica asked about every namespace: memory in bytes, "
                        "not as a share of everything")
    c.add_argument("--config", default=None,
                   help="the haproxy file (default: deploy/haproxy.cfg of this checkout)")


def _semantic_options(s: Any) -> None:
    """`bench semantic`'s options: the index at size, or (instead) the tables' writers or
    one replica's load."""
    s.add_argument("--entries", type=at_least(1), default=100_000, help="cache entries")
    s.add_argument("--queries", type=at_least(1), default=1000, help="lookups measured")
    s.add_argument("--index", choices=("faiss", "pgvector"), default="faiss",
                   help="pgvector: also the pgvector engine on the same vectors, in "
                        "Postgres (EMBEDQ_DATABASE_URL's server, else the bundled one)")
    s.add_argument("--writers", type=at_least(0), default=0, metavar="PUTS",
                   help="instead: PUTS puts per tenant, 1 and 2 tenants at once, global "
                        "lock against per-namespace locks (Postgres)")
    s.add_argument("--replica", type=at_least(0), default=0, metavar="ENTRIES",
                   help="instead: a namespace of ENTRIES loaded from the table and from "
                        "its snapshot, and its bytes held")


def _add_scale(c: Any) -> None:
    c.add_argument("--workers", type=at_least(1), nargs="+", default=[1, 2, 4, 8],
                   help="worker counts measured, the first the baseline")
    c.add_argument("--per-worker", type=at_least(1), default=1600,
                   help="texts of each run's job per worker (about 10 s a run)")
    c.add_argument("--replicas", type=at_least(1), nargs="+", default=[1, 2, 4],
                   help="API replica counts measured")
    c.add_argument("--requests", type=at_least(1), default=1000,
                   help="Zipf-drawn one-text requests of each replica run")
    c.add_argument("--replicas-on", nargs="+", choices=["single", "cluster"],
                   default=["single", "cluster"],
                   help="coordination stores the replicas run on: the configured Redis, "
                        "a local Redis Cluster of 3 masters (started here; needs "
                        "redis-server)")
    c.add_argument("--cluster", action="store_true",
                   help="instead: coordination on a Redis Cluster of 3 masters against one "
                        "Redis (both started here on loopback; needs redis-server)")
    c.add_argument("--fingerprints", type=at_least(1), nargs="+", default=[64, 1000],
                   help="with --cluster: fingerprints per call measured")
    c.add_argument("--rounds", type=at_least(1), default=30,
                   help="with --cluster: rounds of each call on each store (median)")


def _adder(kinds: Any) -> Any:
    """`add(name, help, n=default, file=bool)`: a benchmark's parser with `--json`, and
    `--n` / `--file` for those that read them."""

    def add(name: str, summary: str, n: int | None = None, file: bool = False) -> Any:
        q = kinds.add_parser(name, help=summary, description=f"embedq bench {name}: {summary}.")
        q.add_argument("--json", action="store_true", help="print the report as JSON too")
        if n is not None:
            q.add_argument("--n", type=at_least(1), default=n, help="texts measured")
        if file:
            q.add_argument("--file", default=None,
                           help="JSONL(.gz) with a 'text' field (default: the bundled corpus)")
        return q

    return add


def run(args: argparse.Namespace) -> int:
    if args.kind == "bulk" and args.via_jobs:
        from embedq.bench.jobs import bench_bulk_job

        report = bench_bulk_job(args.n, args.file, args.online_rate)
    elif args.kind == "bulk":
        from embedq.bench.bulk import bench_bulk

        report = bench_bulk(args.n, args.file)
    elif args.kind == "http":
        from embedq.bench import http

        report = http.run(args)
    elif args.kind == "dify":
        from embedq.bench import dify

        report = dify.run(args)
    elif args.kind == "coalesce":
        from embedq.bench import coalesce

        report = coalesce.run(args)
    elif args.kind == "semantic":
        from embedq.bench import semantic

        report = semantic.run(args)
    elif args.kind == "backends" and args.through_serve:
        from embedq.bench.served import through_serve
        from embedq.corpus import load_texts

        report = through_serve(load_texts(max(args.n, 1000), args.file, split="heldout"))
    elif args.kind == "backends":
        from embedq.bench.backends import bench_backends

        report = bench_backends(args.n, args.file)
    elif args.kind == "gpu":
        from embedq.bench import gpu
        report = gpu.run(args)
    elif args.kind == "pipeline":
        from embedq.bench import pipeline

        report = pipeline.run(args)
    elif args.kind == "scale" and args.cluster:
        from embedq.bench import scale_cluster

        report = scale_cluster.run(args)
    elif args.kind == "scale":
        from embedq.bench import scale

        report = scale.run(args)
    elif args.kind == "balance":
        from embedq.bench import balance

        report = balance.run(args)
    elif args.kind == "threshold":
        from embedq.bench import threshold

        report = threshold.run(args)
    if args.json:
        print(json.dumps(report))
    return 0
