"""`embedq bench backends --through-serve`: the int8 tier through `embedq serve`
against bare int8 `encode` on the same texts, in one run.

`embedq serve` starts embedded (no servers: its own temporary data dir) with
EMBEDQ_BACKEND=onnx and EMBEDQ_TIERS=int8; a client sends REQUESTS requests of
PER_REQUEST held-out texts one after the other, then this process encodes the same
number of texts with the int8 encoder in length-sorted batches of 32 (what a bare user
of the model would do), while the server idles. Every round salts its texts anew (no
cache hit) and the two alternate ROUNDS times, so load on a shared machine falls on
both; the median of the rounds' ratios is reported.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from embedq.bench.backends import BATCH, sorted_encode
from embedq.config import Settings
from embedq.testing import processes

REQUESTS = 4
PER_REQUEST = 250
ROUNDS = 5


def through_serve(texts: list[str]) -> dict[str, Any]:
    from embedq.encoders import load_encoder

    need = REQUESTS * PER_REQUEST
    if len(texts) < need:
        raise SystemExit(f"--through-serve needs at least {need} texts (--n {need})")
    texts = texts[:need]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update({"EMBEDQ_BACKEND": "onnx", "EMBEDQ_TIERS": "int8", "HF_HUB_OFFLINE": "1"})
    with tempfile.TemporaryDirectory(prefix="embedq-bench-served-") as tmp:
        env["EMBEDQ_DATA_DIR"] = tmp  # the export made here is the one serve loads
        settings = Settings.from_env({k: v for k, v in env.items() if k.startswith("EMBEDQ_")})
        encoder = load_encoder(settings, "int8")
        encoder.warm_up()
        port = processes.free_port()
        proc = processes.spawn_api(env, port, Path(tmp) / "serve.log")
        url = f"http://127.0.0.1:{port}"
        try:
            processes.wait_http(url + "/readyz", timeout_s=300)
            with httpx.Client(timeout=300) as client:
                _served(client, url, texts, "warm-up")
                rounds = []
                for n in range(ROUNDS):
                    serve = _served(client, url, texts, f"serve {n}")
                    bare = _bare(encoder, texts, f"bare {n}")
                    rounds.append({"serve_texts_s": round(serve, 1),
                                   "bare_texts_s": round(bare, 1),
                                   "ratio": round(serve / bare, 3)})
        finally:
            processes.stop(proc)
    ratio = statistics.median(r["ratio"] for r in rounds)
    print(f"int8 through embedq serve ({REQUESTS} requests of {PER_REQUEST} texts, one after "
          f"the other) over bare int8 encode (batches of {BATCH}, length-sorted), "
          f"{ROUNDS} alternating rounds:")
    for r in rounds:
        print(f"  serve {r['serve_texts_s']:7.1f} texts/s  bare {r['bare_texts_s']:7.1f} "
              f"texts/s  ratio {r['ratio']:.3f}")
    print(f"median ratio {ratio:.3f} (target >= 0.9)")
    return {"requests": REQUESTS, "per_request": PER_REQUEST, "rounds": rounds,
            "median_ratio": round(ratio, 3)}


def _served(client: httpx.Client, url: str, texts: list[str], salt: str) -> float:
    started = time.perf_counter()
    for i in range(REQUESTS):
        part = [f"{salt} {t}" for t in texts[i * PER_REQUEST:(i + 1) * PER_REQUEST]]
        resp = client.post(url + "/v1/embeddings", json={"input": part})
        resp.raise_for_status()
    return len(texts) / (time.perf_counter() - started)


def _bare(encoder: Any, texts: list[str], salt: str) -> float:
    _, seconds = sorted_encode(encoder, [f"{salt} {t}" for t in texts])
    return len(texts) / seconds
