"""`embedq models list|reembed|switch`: the served models (EMBEDQ_MODELS) and upgrades.

`reembed --from A --to B` submits every text A holds as a bulk job under B (embedq/jobs/
reembed.py); `switch ALIAS B` points the alias at B for every process once B has them all
(for `default`, with the semantic cache carried into B's space: embedq/semantic/carry.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from embedq.config import Settings


def cmd_models_list(args: argparse.Namespace) -> int:
    from embedq.encoders.catalog import Catalog

    catalog = Catalog(Settings.from_env())
    aliases = catalog.aliases()
    rows: list[dict[str, Any]] = [
        {"name": m.name, "model": m.model, "default": m.name == aliases["default"],
             "tiers": list(m.tiers), "revisions": m.revisions,
             "queues": [m.online_queue, m.bulk_queue],
             "aliases": sorted(a for a, name in aliases.items() if name == m.name)}
            for m in catalog.models.values()]
    if args.json:
        print(json.dumps(rows))
        return 0
    for row in rows:
        mark = " (default)" if row["default"] else ""
        print(f"{row['name']}{mark}: {row['model']} tiers={','.join(row['tiers'])} "
              f"queues={','.join(row['queues'])} aliases={','.join(row['aliases']) or '-'}")
        for tier, revision in row["revisions"].items():
            print(f"  {tier}: {revision}")
    return 0


def cmd_models_reembed(args: argparse.Namespace) -> int:
    from embedq.deployment import Deployment
    from embedq.jobs.reembed import reembed

    deployment = Deployment.from_settings(Settings.from_env())
    try:
        jobs = deployment.jobs()
        job_id = reembed(jobs, deployment.catalog, args.source, args.target, args.off_peak)
        state: dict[str, Any] = jobs.describe(job_id)
        print(f"job {job_id} submitted ({state['progress']['total']} texts of "
              f"{args.source} under {args.target})", file=sys.stderr)
        if args.wait or deployment.embedded:
            from embedq.cli.progress import wait

            state = wait(jobs, job_id)
        print(json.dumps(state) if args.json else job_id)
        return 0 if state["status"] not in {"failed", "cancelled"} else 1
    finally:
        deployment.close()


def cmd_models_switch(args: argparse.Namespace) -> int:
    from embedq.deployment import Deployment
    from embedq.jobs.reembed import switch
    from embedq.semantic.carry import carrier

    deployment = Deployment.from_settings(Settings.from_env())
    try:
        done = switch(deployment.jobs(), deployment.durable, deployment.catalog,
                      args.alias, args.target, carry=carrier(deployment.service))
    finally:
        deployment.close()
    print(f"{args.alias}: {done.old} -> {args.target} ({done.coverage.held} texts of "
          f"{done.old} all have a vector under {args.target}); every process follows "
          "within 2 s")
    if done.carried is not None:
        print(f"semantic cache: {done.carried.read} live entries of {done.old}, "
              f"{done.carried.added} carried into {args.target}'s space, "
              f"{done.carried.updated} updated")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("models", help="the served models (EMBEDQ_MODELS) and their aliases")
    models_sub = p.add_subparsers(dest="models_command", required=True)
    listing = models_sub.add_parser("list", help="each served model: tiers, revisions, "
                                    "queues, aliases")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_models_list)
    again = models_sub.add_parser(
        "reembed", help="embed every text model A holds (job items, semantic-cache "
        "queries) under model B, as a bulk job (progress and resume as any job)")
    again.add_argument("--from", dest="source", required=True, metavar="A")
    again.add_argument("--to", dest="target", required=True, metavar="B")
    again.add_argument("--off-peak", default=None, metavar="HH:MM-HH:MM",
                       help="run the job only in this window (EMBEDQ_JOB_TIMEZONE)")
    again.add_argument("--wait", action="store_true", help="show progress until it ends")
    again.add_argument("--json", action="store_true")
    again.set_defaults(func=cmd_models_reembed)
    flip = models_sub.add_parser(
        "switch", help="point an alias at model B for every process, once B has a vector "
        "for every text the alias's model holds; switching `default` carries the semantic "
        "cache into B's space with it")
    flip.add_argument("alias")
    flip.add_argument("target", metavar="B")
    flip.set_defaults(func=cmd_models_switch)
