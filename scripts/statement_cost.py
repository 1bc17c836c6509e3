"""What one vector lookup costs the client on embedq's single-statement path, against the
same statement on a bare psycopg connection: p50 of `--n` one-fingerprint lookups (each a
miss, so every call is a round trip), in rounds that alternate the two.

    python scripts/statement_cost.py [--n 1000] [--rounds 3]

Runs on EMBEDQ_DATABASE_URL (Postgres). A measuring tool: nothing in embedq imports it.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable

import psycopg

from embedq.cache.durable import _PG_SELECT, DurableStore
from embedq.config import Settings
from embedq.models.engine import Database


def p50_ms(call: Callable[[list[str]], object], n: int) -> float:
    for _ in range(50):
        call([uuid.uuid4().hex])
    times = []
    for _ in range(n):
        fp = [uuid.uuid4().hex]
        started = time.perf_counter()
        call(fp)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    settings = Settings.from_env()
    db = Database.from_settings(settings)
    if db.dialect != "postgresql":
        raise SystemExit("set EMBEDQ_DATABASE_URL to a Postgres database")
    store = DurableStore(db)
    url = db.url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(url, autocommit=True) as raw:
        for rnd in range(1, args.rounds + 1):
            ours = p50_ms(store.get_many, args.n)
            bare = p50_ms(lambda fps: raw.execute(_PG_SELECT, (fps,)).fetchall(), args.n)
            print(f"round {rnd}: DurableStore.get_many p50 {ours:.3f} ms, "
                  f"bare psycopg p50 {bare:.3f} ms")
    db.dispose()


if __name__ == "__main__":
    main()
