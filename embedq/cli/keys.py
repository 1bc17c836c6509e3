"""`embedq keys create|list|revoke`: API keys of tenants (embedq.tenants).

`create` prints the key once (with --json as {"key": ...}, plus its id and tenant); the
database keeps only its digest. A revoked key stops working within a second in every API
process. These commands act on the database directly: whoever runs them is the admin.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def _store() -> Any:
    from embedq.config import Settings
    from embedq.models import Database
    from embedq.models.migrate import upgrade
    from embedq.tenants import KeyStore

    settings = Settings.from_env()
    if settings.resolved_database_url.startswith("sqlite"):
        upgrade(settings.resolved_database_url)  # embedded: migrates itself, as Client does
    return KeyStore(Database.from_settings(settings))


def cmd_keys(args: argparse.Namespace) -> int:
    store = _store()
    try:
        if args.keys_action == "create":
            created = store.create(args.tenant, args.name, args.scopes, args.rate,
                                   args.texts_per_day)
            if args.json:
                print(json.dumps({"key": created.key, **created.info.to_json()}))
            else:
                print(created.key)
                print(f"key {created.info.id} ({created.info.name}) of tenant "
                      f"{created.info.tenant}, scopes {','.join(created.info.scopes)}: the "
                      "key above is shown once; store it now", file=sys.stderr)
        elif args.keys_action == "list":
            rows = store.list(args.tenant, revoked=args.revoked)
            if args.json:
                print(json.dumps([row.to_json() for row in rows]))
            elif not rows:
                print("no keys" + (f" of tenant {args.tenant}" if args.tenant else "") +
                      ": `embedq keys create --tenant NAME` makes one (the API is open "
                      "without keys, on loopback only)", file=sys.stderr)
            for row in [] if args.json else rows:
                limits = f"rate={row.rate_per_s or '-'}/s texts/day={row.texts_per_day or '-'}"
                state = " revoked" if row.revoked_at else ""
                print(f"{row.id}  {row.tenant:<16} {row.name:<24} "
                      f"{','.join(row.scopes):<40} {limits}{state}")
        else:
            info = store.revoke(args.id, args.tenant)
            print(f"key {info.id} ({info.name}) of tenant {info.tenant} revoked; API "
                  "processes refuse it within a second")
    finally:
        store.db.dispose()
    return 0


def add_parser(sub: Any) -> None:
    from embedq.tenants import SCOPES

    p = sub.add_parser("keys", help="API keys of tenants: create, list, revoke")
    actions = p.add_subparsers(dest="keys_action", required=True)
    c = actions.add_parser("create", help="a new key; printed once")
    c.add_argument("--tenant", required=True, help="the tenant the key acts for")
    c.add_argument("--name", default=None, help="a label for lists and logs")
    c.add_argument("--scopes", default=None,
                   help=f"comma-separated, of {', '.join(SCOPES)} (default: all but admin)")
    c.add_argument("--rate", type=float, default=None, metavar="PER_S",
                   help="requests a second (default: no limit)")
    c.add_argument("--texts-per-day", type=int, default=None,
                   help="texts embedded a day (default: no limit)")
    c.add_argument("--json", action="store_true", help='print {"key": ..., "id": ...}')
    ls = actions.add_parser("list", help="keys (never the keys themselves)")
    ls.add_argument("--tenant", default=None)
    ls.add_argument("--revoked", action="store_true", help="include revoked keys")
    ls.add_argument("--json", action="store_true")
    rv = actions.add_parser("revoke", help="revoke a key by id (`embedq keys list`)")
    rv.add_argument("id")
    rv.add_argument("--tenant", default=None, help="only if the key is this tenant's")
    p.set_defaults(func=cmd_keys)
