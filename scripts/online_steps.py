"""Where a sequential one-text miss spends its time in a local-encoding service
(EMBEDQ_ONLINE_ENCODE=local), in process, without HTTP: each step of
`EmbeddingService.embed` and of the in-process encode path timed around its call.

    python scripts/online_steps.py [--n 100] [--gap-ms 0]

Runs on the EMBEDQ_* environment (a cluster: Redis and Postgres, or embedded). Texts:
the held-out corpus split, salted per run so every call misses. A measuring tool: nothing
in embedq imports it.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from embedq.config import Settings
from embedq.corpus import load_texts
from embedq.deployment import Deployment


def timed(obj: Any, name: str, label: str, spent: dict[str, list[float]]) -> None:
    original: Callable[..., Any] = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[label].append(time.perf_counter() - started)

    setattr(obj, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--gap-ms", type=float, default=0.0,
                    help="pause between calls (a client's think time; not in the figures)")
    args = ap.parse_args()
    deployment = Deployment.from_settings(Settings.from_env().with_overrides(
        online_encode="local"))
    service = deployment.service
    runtime = deployment.local_encoding.runtime
    spent: dict[str, list[float]] = defaultdict(list)
    for obj, name, label in (
        (service, "_lookup", "lookup (hot MGET, durable SELECT)"),
        (service, "_claim", "claim"),
        (service, "_encode_here", "encode here, all of it"),
        (runtime.fencing, "lease", "  run leases and attempt counts"),
        (runtime.fencing, "triage", "  triage (no round trip but dead letters)"),
        (runtime.batcher, "submit", "  batcher submit (token count)"),
        (runtime.batcher, "keep", "  interest check"),
        (runtime.batcher, "on_attempt", "  attempt count"),
        (runtime.encoder, "encode", "  the model"),
        (service, "_collect", "collect"),
        (service, "_record", "counters"),
    ):
        timed(obj, name, label, spent)
    run = uuid.uuid4().hex[:8]
    texts = [f"[{run}-{i}] {t}" for i, t in enumerate(load_texts(args.n + 5, split="heldout"))]
    for text in texts[:5]:
        service.embed([text])
    spent.clear()
    elapsed = 0.0
    for text in texts[5:]:
        time.sleep(args.gap_ms / 1000)
        started = time.perf_counter()
        service.embed([text])
        elapsed += time.perf_counter() - started
    total = elapsed * 1000 / args.n
    print(f"{args.n} sequential one-text misses, {total:.2f} ms a call:")
    for label, times in spent.items():
        print(f"  {label:38s} {sum(times) * 1000 / args.n:6.2f} ms")
    deployment.close()


if __name__ == "__main__":
    main()
