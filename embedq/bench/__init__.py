"""`embedq bench`: speed figures as ratios to a baseline measured in the same run.

    bulk.py      `embedq bench bulk`: Client.embed over the corpus against bare encode
    jobs.py      `embedq bench bulk --via-jobs`: `embedq bulk` end to end, online latency
    http.py      `embedq bench http`: the HTTP API under 50 concurrent clients
    dify.py      `embedq bench dify`: the requests Dify sends (OpenAI and TEI providers)
    dify_bare.py its bare-model phase, the baseline the requests are measured against
    coalesce.py  `embedq bench coalesce`: a slow upstream, with and without embedq
    semantic.py  `embedq bench semantic`: the semantic cache's index at size
    backends.py  `embedq bench backends`: torch against ONNX Runtime fp32 and int8
    gpu.py       `embedq bench gpu`: fp16 and fp32 on a CUDA GPU, the index at 1M entries
    threshold.py `embedq bench threshold`: the semantic threshold's table, tune and held-out
    pipeline.py  `embedq bench pipeline`: the pipeline with a free model against its storage
    cluster.py   the serve (and worker) a bench starts for itself, and stops
    stats.py     the percentile they all report with

The top layer: it may import anything in embedq; only embedq.cli imports it. Texts come
from the bundled corpus (embedq.corpus) or `--file`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(sub: Any, handler: Any) -> None:
    p = sub.add_parser("bench", help="benchmarks (ratios to a same-run baseline)")
    p.add_argument("kind", choices=["bulk", "semantic", "http", "coalesce", "threshold",
                                          "backends", "dify", "gpu", "pipeline"])
    p.add_argument("--entries", type=int, default=100_000, help="semantic: cache entries")
    p.add_argument("--queries", type=int, default=1000,
                   help="semantic, gpu: lookups measured")
    p.add_argument("--index-entries", type=int, default=1_000_000,
                   help="gpu: entries in the semantic index built on the GPU")
    p.add_argument("--pipeline-texts", type=int, default=20_000,
                   help="gpu: texts of the bulk job run through the embedded pipeline "
                        "(0: skip it)")
    p.add_argument("--report", default="docs/gpu-report.md",
                   help="gpu: the report written (only after a run on a CUDA device)")
    p.add_argument("--n", type=int, default=5000)
    p.add_argument("--file", default=None,
                   help="JSONL(.gz) with a 'text' field (default: the bundled corpus)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--pairs-file", default=None,
                   help="threshold: the tune split (default tests/data/semantic_pairs.tune.jsonl)")
    p.add_argument("--heldout-file", default=None,
                   help="threshold: the held-out split, reported only "
                        "(default tests/data/semantic_pairs.heldout.jsonl)")
    p.add_argument("--lodo", nargs="?", default=None,
                   const="", metavar="FILE",
                   help="threshold: leave-one-domain-out figures on FILE's domains instead "
                        "of the tune table (default tests/data/semantic_pairs.domains.jsonl)")
    p.add_argument("--via-jobs", action="store_true",
                   help="bulk: through `embedq bulk` (jobs), e.g. --n 20000")
    p.add_argument("--online-rate", type=float, default=10.0,
                   help="bulk --via-jobs: online requests a second while a job runs")
    p.add_argument("--texts", type=int, default=600,
                   help="dify: texts of each indexing phase (OpenAI route, TEI routes)")
    p.add_argument("--sequential", type=int, default=60,
                   help="dify: one-text requests sent one at a time (query embedding)")
    p.add_argument("--threads", type=int, default=10,
                   help="dify: indexing threads (Dify's indexing runner uses 10)")
    p.add_argument("--url", default=None,
                   help="dify: a running server to target (then nothing is started)")
    p.add_argument("--api-key", default=None, help="dify --url: the server's API key")
    p.set_defaults(func=handler)


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
    elif args.kind == "backends":
        from embedq.bench.backends import bench_backends

        report = bench_backends(args.n, args.file)
    elif args.kind == "gpu":
        from embedq.bench import gpu
        report = gpu.run(args)
    elif args.kind == "pipeline":
        from embedq.bench import pipeline

        report = pipeline.run(args)
    elif args.kind == "threshold":
        from embedq.bench import threshold

        report = threshold.run(args)
    if args.json:
        print(json.dumps(report))
    return 0
