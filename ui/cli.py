"""Command `serve` (docs/design.md, Contract 2: the command line): start the web UI.

    drt-reader [--home DIR] [--model PATH] serve [--host 127.0.0.1] [--port 7860] [--max-file-size 50mb] [--json]

With `--json` it prints one JSON object ({"url", "host", "port", "home", "model", "max_file_size"})
once the server listens, then serves until Ctrl-C. Gradio is imported inside the handler, so
`drt-reader --help` stays fast.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
import threading

LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
MALLOC_ARENAS = 2  # glibc malloc arenas of the server (see limit_malloc_arenas)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="start the web UI (Gradio) on 127.0.0.1:7860")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    p.add_argument(
        "--max-file-size", default="50mb", help="largest upload, e.g. 50mb, 200mb, 1gb (default 50mb)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object once the server listens")
    p.set_defaults(func=cmd_serve)


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def limit_malloc_arenas(n: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas at n (mallopt M_ARENA_MAX) unless MALLOC_ARENA_MAX is set.

    Gradio runs each job on whichever worker thread is free, and glibc gives every new thread its
    own arena (up to 8 per core), each keeping the memory its torch work freed: with 16 clients the
    server's anonymous RSS grew by 0.6 GB more than with 1 client for the same number of calls
    (`drt-reader bench load`, docs/reliability-load.md). Model jobs run one at a time anyway, so
    two arenas cost no contention. False where it does not apply (not glibc)."""
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return bool(ctypes.CDLL(None).mallopt(-8, int(n)))  # M_ARENA_MAX
    except (OSError, AttributeError):
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    from cli_io import UserError

    limit_malloc_arenas()  # before Gradio starts its worker threads
    if not 0 < args.port < 65536:
        raise UserError(f"--port must be between 1 and 65535, got {args.port}")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from .context import UIContext, human_size

    ctx = UIContext(args.home, args.model, max_file_bytes=args.max_file_size)
    if not _is_loopback(args.host):
        print(
            f"drt-reader: warning: serving on {args.host} makes the library reachable from the network; "
            "there is no login: put an authenticating TLS proxy in front",
            file=sys.stderr,
        )
    from . import blocks

    try:
        demo, url = blocks.launch(ctx, host=args.host, port=args.port, prevent_thread_lock=True)
    except OSError as e:
        raise UserError(f"cannot serve on {args.host}:{args.port}: {e}") from e
    # load the model in the background, so the first question does not wait for it
    threading.Thread(target=ctx.fingerprint, name="drt-warm-engine", daemon=True).start()
    info = {
        "url": url,
        "host": args.host,
        "port": args.port,
        "home": str(ctx.home),
        "model": ctx.model,
        "max_file_size": ctx.max_file_bytes,
    }
    if args.json:
        print(json.dumps(info), flush=True)
    else:
        print(f"drt-reader: serving {ctx.home} at {url} (uploads up to {human_size(ctx.max_file_bytes)}); "
              "Ctrl-C stops", flush=True)  # fmt: skip
    try:
        demo.block_thread()
    except KeyboardInterrupt:
        pass
    finally:
        demo.close()
        ctx.close()
    return 0
