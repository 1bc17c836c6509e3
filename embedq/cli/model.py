"""`embedq model export [--tier fp32|int8 ...]`: make the ONNX exports workers reuse."""

from __future__ import annotations

import argparse
import json
from typing import Any

from embedq.config import Settings


def cmd_model_export(args: argparse.Namespace) -> int:
    from embedq.encoders.export import export_model
    from embedq.encoders.tiers import ONNX_TIERS, check_tier

    settings = Settings.from_env()
    # fp16 in EMBEDQ_TIERS runs on torch: by default only the ONNX tiers listed are made.
    tiers = [check_tier(t) for t in args.tier] if args.tier else \
        [t for t in settings.model.tiers if t in ONNX_TIERS]
    rows = []
    for tier in tiers:
        done = export_model(settings, tier)
        rows.append({"tier": tier, "folder": str(done.folder), "exported": done.exported})
        if not args.json:
            verb = "exported" if done.exported else "already exported"
            print(f"{tier}: {verb} in {done.folder}")
    if args.json:
        print(json.dumps(rows))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("model", help="the model's ONNX exports (EMBEDQ_BACKEND=onnx)")
    model_sub = p.add_subparsers(dest="model_command", required=True)
    export = model_sub.add_parser(
        "export", help="export the model for each tier once, under the data dir")
    export.add_argument("--tier", action="append", choices=["fp32", "int8"],
                        help="a tier to export (repeatable; default: the ONNX tiers in "
                        "EMBEDQ_TIERS)")
    export.add_argument("--json", action="store_true")
    export.set_defaults(func=cmd_model_export)
