"""``greenlab data fetch [NAME ...|--all]``, ``greenlab data status``, ``greenlab data path``:
staging datasets in the cache before a class (``greenlab.training.datacache`` does the work;
``--dir`` picks another cache folder)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from greenlab.training import datacache
from greenlab.training.datacache import NAMES, TIMEOUT_S, FetchError, fetch, folder, policy, status


def add_data_arguments(parser) -> None:
    """The ``greenlab data`` subcommands: fetch, status, path."""
    sub = parser.add_subparsers(dest="data_command")
    f = sub.add_parser("fetch", help="download datasets into the cache (checksums verified)")
    f.add_argument("names", nargs="*", metavar="NAME", help=f"one or more of: {', '.join(NAMES)}")
    f.add_argument("--all", action="store_true", help="every dataset")
    f.add_argument("--timeout", type=float, default=TIMEOUT_S,
                   help=f"connect/read timeout per attempt in seconds (default {TIMEOUT_S:g})")
    s = sub.add_parser("status", help="what is cached, whether it is verified, and where")
    p = sub.add_parser("path", help="print the cache folder (or one dataset's folder)")
    p.add_argument("name", nargs="?", metavar="NAME", help=f"one of: {', '.join(NAMES)}")
    for each in (f, s, p):
        each.add_argument("--dir", default=None,
                          help="cache folder (default: GREENLAB_CACHE_DIR, else data/cache in a checkout, "
                               "else ~/.cache/greenlab)")


def data_main(args) -> int:
    """Run ``greenlab data ...``; returns the exit code."""
    command = getattr(args, "data_command", None)
    try:
        root = _cache_folder(args)
        if command == "fetch":
            return _fetch_command(args, root)
        if command == "status":
            print(f"dataset cache: {root}" + ("" if root.is_dir() else " (no such folder yet: fetch creates it)"))
            states = [status(n, root) for n in NAMES]
            for st in states:
                print("  " + st.line())
            return 0
        if command == "path":
            print(folder(args.name, root) if args.name else root)
            return 0
    except ValueError as exc:
        print(f"greenlab data: {exc}", file=sys.stderr)
        return 2
    print("usage: greenlab data {fetch [NAME ...|--all] | status | path [NAME]} [--dir DIR]", file=sys.stderr)
    return 2


def _cache_folder(args) -> Path:
    """The cache folder ``--dir`` names (else the default one); an empty ``--dir`` is refused
    (it was read as the working folder). A folder not yet there is fine: ``fetch`` creates it,
    ``status`` says so, ``path`` prints where a dataset will go."""
    given = getattr(args, "dir", None)
    if given is not None and not given:
        raise ValueError("--dir must be a folder path, got ''")
    return datacache.cache_root(given)


def _fetch_command(args, root: Path) -> int:
    datacache.check_timeout(args.timeout)  # options first: each error names its own option
    if args.all == bool(args.names):
        raise ValueError(f"give dataset names or --all (not both); names: {', '.join(NAMES)}")
    names = list(NAMES) if args.all else [datacache.check_name(n) for n in args.names]
    mode, why = policy(None) if os.environ.get("GREENLAB_DOWNLOAD", "").strip() else ("try", "")
    if mode == "never":
        print(f"greenlab data fetch: {why}; unset it to download", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        start = time.monotonic()
        try:
            st = fetch(name, root, timeout_s=args.timeout)
        except (FetchError, OSError) as exc:
            failed += 1
            print(f"{name}: download failed after {time.monotonic() - start:.1f} s: {exc}", file=sys.stderr)
            continue
        print(f"{name}: {st.state} in {st.folder} ({st.size_bytes / 1e6:.1f} MB)")
    return 1 if failed else 0
