"""What the thread that runs a CPU torch model costs it: one-text `encode` latency when
every pass runs on one thread, against a first pass (the warm-up) on another thread, and
against FAISS having run a search on another thread first, with and without FAISS held
to one thread. Each case runs in a fresh process (OpenMP teams live as long as their
thread), on the configured model.

    python scripts/model_thread.py [--calls 150] [--gap-ms 3] [--rounds 2]
    python scripts/model_thread.py --encode-path [--calls 150] [--rounds 2]

`--encode-path`: on one thread, `SentenceTransformer.encode` against the torch encoder's
own direct pass (`SentenceTransformerEncoder.encode`), one text and four texts a call.

Texts: the held-out corpus split. A measuring tool: nothing in embedq imports it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

CASES = {
    "all passes on one thread (embedq's batcher since this change)": "one-thread",
    "warm-up on the loading thread, passes on another (before)": "warm-up-elsewhere",
    "FAISS search on another thread first": "faiss",
    "FAISS search on another thread first, FAISS at one thread (embedq's index)": "faiss-one",
}


def measure(case: str, calls: int, gap_s: float) -> float:
    """In this process: the p50 one-text encode (ms) on a thread of its own."""
    import numpy as np

    from embedq.config import Settings
    from embedq.corpus import load_texts
    from embedq.encoders import load_encoder

    encoder = load_encoder(Settings.from_env())
    texts = load_texts(calls + 20, split="heldout")
    if case == "warm-up-elsewhere":
        encoder.warm_up()
    if case.startswith("faiss"):
        import faiss

        if case == "faiss-one":
            faiss.omp_set_num_threads(1)
        index = faiss.IndexFlatIP(384)
        index.add(np.random.default_rng(0).random((1000, 384), dtype=np.float32))
        index.search(np.random.default_rng(1).random((64, 384), dtype=np.float32), 5)
    times: list[float] = []

    def run() -> None:
        encoder.warm_up()
        for text in texts:
            time.sleep(gap_s)  # a server's calls come apart, not back to back
            started = time.perf_counter()
            encoder.encode([text])
            times.append((time.perf_counter() - started) * 1000)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return statistics.median(times[20:])


def encode_path(calls: int) -> dict[str, float]:
    """In this process, on one thread: p50 ms of stock encode and of the direct pass."""
    from embedq.config import Settings
    from embedq.corpus import load_texts
    from embedq.encoders import load_encoder

    encoder: Any = load_encoder(Settings.from_env())
    model = encoder.model
    texts = load_texts(4 * calls + 20, split="heldout")
    out: dict[str, float] = {}

    def stock(batch: list[str]) -> Any:
        return model.encode(batch, batch_size=len(batch), convert_to_numpy=True,
                            normalize_embeddings=False, show_progress_bar=False)

    def run() -> None:
        encoder.warm_up()
        for size in (1, 4):
            for name, fn in (("stock encode", stock), ("direct pass", encoder.encode)):
                times = []
                for i in range(0, size * calls, size):
                    started = time.perf_counter()
                    fn(texts[i : i + size])
                    times.append((time.perf_counter() - started) * 1000)
                out[f"{name}, {size} text{'s' if size > 1 else ''} a call"] = \
                    statistics.median(times[10:])

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=150)
    ap.add_argument("--gap-ms", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--encode-path", action="store_true")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.encode_path:
        rounds = [encode_path(args.calls) for _ in range(args.rounds)]
        print(f"p50 ms a call on one thread, {args.calls} calls, {args.rounds} rounds:")
        for label in rounds[0]:
            print(f"  {' / '.join(f'{r[label]:.2f}' for r in rounds)} ms  {label}")
        return
    if args.case:
        print(json.dumps(measure(args.case, args.calls, args.gap_ms / 1000)))
        return
    results: dict[str, list[float]] = {label: [] for label in CASES}
    for _ in range(args.rounds):  # alternating, so a busy moment hits every case
        for label, case in CASES.items():
            out = subprocess.run(
                [sys.executable, __file__, "--case", case, "--calls", str(args.calls),
                 "--gap-ms", str(args.gap_ms)],
                check=True, capture_output=True, text=True)
            results[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"one-text encode p50, {args.calls} calls {args.gap_ms:g} ms apart, "
          f"{args.rounds} rounds:")
    for label, values in results.items():
        print(f"  {' / '.join(f'{v:.2f}' for v in values)} ms  {label}")


if __name__ == "__main__":
    main()
