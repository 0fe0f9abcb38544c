"""``cache``: list, verify and clear the embedding cache's stores."""

from __future__ import annotations

import argparse


def _add_cache(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="the embedding cache: list its stores, verify their vectors, clear them")
    csub = p.add_subparsers(dest="cache_command", required=True)
    for name, helptext in (
        ("list", "each store: model, fingerprint, vector count, width and size"),
        ("verify", "check each store's database and vectors (length, NaN/inf); exit 1 on a problem"),
        ("clear", "delete the stores (all, or --model's)"),
    ):
        c = csub.add_parser(name, help=helptext)
        c.add_argument(
            "--cache-dir",
            default=None,
            help="embedding cache folder, as for run (default $EMBEDSCOPE_CACHE or ~/.cache/embedscope); "
            "its stores are in its embeddings/ folder (stores directly in it, as older versions put them, "
            "are read too)",
        )
        c.add_argument("--model", default=None, help="only this model's stores (its name, or a fingerprint prefix)")
        c.set_defaults(func=_cmd_cache)
        if name == "verify":
            c.add_argument(
                "--repair",
                action="store_true",
                help="drop bad vectors and move damaged stores aside (they are re-encoded on the next run)",
            )


def _cmd_cache(args: argparse.Namespace) -> int:
    from embedscope.models import cache_admin
    from embedscope.results.table import markdown_table

    folder = cache_admin.cache_folder(args.cache_dir)
    if args.cache_command == "list":
        stores = cache_admin.list_stores(folder, args.model)
        errors = any(s.error for s in stores)
        rows = [
            [
                s.model,
                s.fingerprint[:12],
                "?" if s.vectors is None else str(s.vectors),
                str(s.dim or ""),
                f"{s.bytes / 1e6:.1f} MB",
                *([s.error] if errors else []),
            ]
            for s in stores
        ]
        header = ["model", "fingerprint", "vectors", "dim", "size", *(["error"] if errors else [])]
        print(
            markdown_table(header, rows)
            if rows
            else f"no stores in {folder}"
            + (f" for model {args.model!r}" if args.model else "")
            + ("" if folder.exists() else " (no such folder)")
        )
        return 0
    if args.cache_command == "verify":
        reports = cache_admin.verify_stores(folder, args.model, repair=args.repair)
        for r in reports:
            status = "ok" if r.ok else "; ".join(r.problems)
            print(
                f"{r.model} {r.fingerprint[:12]}: {r.checked} vectors checked, {status}"
                + (f" ({r.repaired})" if r.repaired else "")
            )
        if not reports:
            print(f"no stores in {folder}")
        return 0 if all(r.ok for r in reports) or args.repair else 1
    removed = cache_admin.clear_stores(folder, args.model)
    damaged = sum(1 for s in removed if ".sqlite.corrupt-" in s.path.name)
    print(
        f"deleted {len(removed)} store(s)"
        + (f" ({damaged} damaged, moved aside earlier)" if damaged else "")
        + f", {sum(s.vectors or 0 for s in removed)} vectors, {sum(s.bytes for s in removed) / 1e6:.1f} MB from {folder}"
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the cache command."""
    _add_cache(sub)
