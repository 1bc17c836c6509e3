"""`embedq demo`: embed a corpus slice twice through the full pipeline and report.

Runs on embedded defaults (no servers) in a fresh temporary data directory, so the first
pass shows cold work and the second pass shows the exact cache.
"""

from __future__ import annotations

import os
import tempfile
import time

from embedq.config import Settings
from embedq.corpus import iter_corpus


def run_demo(path: str | None, lines: int) -> int:
    from embedq.client import Client

    texts = [t for _, t in iter_corpus(path, limit=lines)]
    settings = Settings.from_env()
    with tempfile.TemporaryDirectory(prefix="embedq-demo-") as tmp:
        if settings.embedded and not os.environ.get("EMBEDQ_DATA_DIR"):
            settings = settings.with_overrides(data_dir=__import__("pathlib").Path(tmp))
        started = time.perf_counter()
        client = Client(settings)
        client.deployment.ensure_worker()  # the model loads here, not inside pass 1
        print(f"embedq demo: {len(texts)} texts, {len(set(texts))} unique, model "
              f"{client.service.model} ({'embedded' if settings.embedded else 'cluster'})")
        print(f"  set-up (model load, migrations): {time.perf_counter() - started:.1f} s")
        header = f"  {'pass':<6}{'texts':>7}{'unique':>8}{'encoded':>9}{'hits':>7}"
        print(header + f"{'coalesced':>11}{'time s':>9}{'texts/s':>10}")
        for n in (1, 2):
            before = client.stats()
            t0 = time.perf_counter()
            vectors = client.embed(texts)
            dt = time.perf_counter() - t0
            after = client.stats()
            delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
            assert len(vectors) == len(texts)
            print(
                f"  {n:<6}{len(texts):>7}{len(set(texts)):>8}{delta['encoded']:>9}"
                f"{delta['cache_hits']:>7}{delta['coalesced']:>11}{dt:>9.2f}"
                f"{len(texts) / dt:>10.0f}"
            )
        client.close()
    return 0
