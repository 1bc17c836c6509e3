"""`embedq models list`: the served models (EMBEDQ_MODELS), their tiers, queues and aliases."""

from __future__ import annotations

import argparse
import json
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


def add_parser(sub: Any) -> None:
    p = sub.add_parser("models", help="the served models (EMBEDQ_MODELS) and their aliases")
    models_sub = p.add_subparsers(dest="models_command", required=True)
    listing = models_sub.add_parser("list", help="each served model: tiers, revisions, "
                                    "queues, aliases")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_models_list)
