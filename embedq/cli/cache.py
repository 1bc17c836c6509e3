"""`embedq cache put|lookup|delete|stats|config|feedback`: the semantic cache from the command line.

    embedq cache put NAMESPACE QUERY PAYLOAD_JSON [--ttl-s N] [--sliding] [--metadata JSON]
    embedq cache lookup NAMESPACE QUERY [--threshold T] [-k K] [--filter JSON] [--explain]
    embedq cache delete NAMESPACE (ENTRY_ID | --all)
    embedq cache stats NAMESPACE
    embedq cache config NAMESPACE [--max-false-hit-rate R] [--threshold T] [--trust-score S]
    embedq cache feedback NAMESPACE HIT_ID (--correct | --wrong)
    embedq cache index-setup   (EMBEDQ_SEMANTIC_INDEX=pgvector: column, embeddings, HNSW)
Every command prints JSON. Lookups exit 0 on a hit and 1 on a miss, for scripts.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from embedq.errors import InvalidInput


def add_parser(sub: Any) -> None:
    p = sub.add_parser("cache", help="the semantic cache: put, lookup, delete, stats")
    actions = p.add_subparsers(dest="cache_action", required=True)

    put = actions.add_parser("put", help="store a (query, payload) entry; prints its id")
    put.add_argument("namespace")
    put.add_argument("query")
    put.add_argument("payload", help="any JSON value, e.g. '{\"answer\": \"...\"}' or '\"text\"'")
    put.add_argument("--ttl-s", type=int, default=None, help="seconds to live (default: none)")
    put.add_argument("--sliding", action="store_true", help="each hit restarts the ttl")
    put.add_argument("--metadata", default=None, help="a JSON object")

    look = actions.add_parser("lookup", help="find entries meaning the same (exit 1 on a miss)")
    look.add_argument("namespace")
    look.add_argument("query")
    look.add_argument("--threshold", type=float, default=None,
                      help="cosine in [-1, 1]; 1.0 = exact text only")
    look.add_argument("-k", type=int, default=1)
    look.add_argument("--filter", default=None, help="a JSON object of metadata to match")
    look.add_argument("--explain", action="store_true",
                      help="list every candidate considered, its score, why it was "
                           "refused and the checks it passed")

    rm = actions.add_parser("delete", help="delete one entry, or --all of a namespace")
    rm.add_argument("namespace")
    rm.add_argument("entry_id", nargs="?", type=int)
    rm.add_argument("--all", action="store_true", help="delete the whole namespace")

    st = actions.add_parser("stats", help="entries, hits, misses, index kind, last sync, "
                            "the threshold it runs at, served hits by feedback")
    st.add_argument("namespace")

    cfg = actions.add_parser("config", help="set a namespace's error budget and base "
                             "threshold (creates it if new)")
    cfg.add_argument("namespace")
    cfg.add_argument("--max-false-hit-rate", type=float, default=None,
                     help="largest share of served hits that may be wrong, e.g. 0.01 "
                          "(default: no budget)")
    cfg.add_argument("--threshold", type=float, default=None,
                     help="the namespace's base threshold (default: the server's)")
    cfg.add_argument("--trust-score", type=float, default=None,
                     help="with --max-false-hit-rate: serve a candidate the verifier "
                          "refuses only on a model-judged slot (content, disjoint) from "
                          "this score; wrong verdicts on those hits raise it (default: "
                          "never served)")

    fb = actions.add_parser("feedback", help="say whether a served hit was right")
    fb.add_argument("namespace")
    fb.add_argument("hit_id", help="a match's hit_id from a lookup")
    verdict = fb.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--correct", dest="correct", action="store_true")
    verdict.add_argument("--wrong", dest="correct", action="store_false")
    actions.add_parser("index-setup", help="EMBEDQ_SEMANTIC_INDEX=pgvector: create the "
                       "vector extension, column and HNSW index in Postgres, and embed "
                       "the entries already stored (idempotent)")
    for action in (put, look, rm, st, cfg, fb):
        action.add_argument("--tenant", default=None,
                            help="act as this tenant (default: admin; a put creates "
                                 "namespaces of the tenant default)")
    p.set_defaults(func=cmd_cache)


def _json(raw: str | None, name: str) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(
            f"{name} is not JSON ({exc}); quote strings, e.g. '\"an answer\"'", name
        ) from exc


def cmd_cache(args: argparse.Namespace) -> int:
    from embedq.deployment import Deployment
    from embedq.semantic.service import SemanticCache
    from embedq.tenants import DEFAULT_TENANT, check_tenant

    if args.cache_action == "delete" and (args.entry_id is None) == (not args.all):
        raise InvalidInput("embedq cache delete needs an ENTRY_ID or --all (not both)")
    if args.cache_action == "index-setup":
        return _index_setup()
    tenant = None if args.tenant is None else check_tenant(args.tenant)
    service = Deployment.from_settings().service
    cache = SemanticCache(service)
    code = 0
    try:
        out: dict[str, Any]
        if args.cache_action == "put":
            entry_id = cache.put(args.namespace, args.query, _json(args.payload, "payload"),
                                 ttl_s=args.ttl_s, sliding=args.sliding or None,
                                 metadata=_json(args.metadata, "metadata"),
                                 tenant=tenant or DEFAULT_TENANT)
            out = {"id": entry_id, "namespace": args.namespace}
        elif args.cache_action == "lookup":
            cache.check_owner(args.namespace, tenant)
            result = cache.lookup(args.namespace, args.query, threshold=args.threshold,
                                  k=args.k, filter=_json(args.filter, "filter"),
                                  explain=args.explain)
            out = result.to_json()
            code = 0 if result.hit else 1
        elif args.cache_action == "delete":
            if args.all:
                out = {"namespace": args.namespace,
                       "deleted": cache.drop(args.namespace, tenant)}
            else:
                cache.delete(args.namespace, args.entry_id, tenant)
                out = {"id": args.entry_id, "deleted": True}
        elif args.cache_action == "config":
            out = cache.configure(args.namespace, max_false_hit_rate=args.max_false_hit_rate,
                                  threshold=args.threshold, trust_score=args.trust_score,
                                  tenant=tenant or DEFAULT_TENANT)
        elif args.cache_action == "feedback":
            cache.check_owner(args.namespace, tenant)
            out = cache.give_feedback(args.namespace, args.hit_id, args.correct, tenant)
        else:
            cache.check_owner(args.namespace, tenant)
            out = cache.stats(args.namespace)
        print(json.dumps(out, ensure_ascii=False))
    finally:
        cache.close()
        service.close()
    return code


def _index_setup() -> int:
    """The pgvector engine's column and indexes; the model's dimensions are those of a
    vector it gives (the settings may leave them to the model)."""
    from embedq.config import Settings
    from embedq.deployment import Deployment
    from embedq.semantic import pgvector
    from embedq.semantic.engine import PGVECTOR
    from embedq.semantic.service import SemanticCache

    settings = Settings.from_env()
    if settings.semantic.index != PGVECTOR:
        raise InvalidInput(
            "embedq cache index-setup prepares Postgres for EMBEDQ_SEMANTIC_INDEX="
            "pgvector: set it (in every process's environment) and run this again")
    service = Deployment.from_settings(settings).service
    try:
        cache = SemanticCache(service, start=False)
        dimension = len(service.embed(["dimension probe"]).vectors()[0])
        out = pgvector.setup(service.db, cache.space, dimension,
                              settings.semantic.index_build_memory_mb)
        print(json.dumps(out))
    finally:
        service.close()
    return 0
