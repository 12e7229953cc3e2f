"""`samsa console --bootstrap-server HOST:PORT --listen HOST:PORT [--read-only]`: serve the web
console until Ctrl-C/SIGTERM. Connection settings as the admin commands take them
(`--command-config FILE`, `-X KEY=VALUE`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from samsa.broker.admin.cli import settings
from samsa.broker.admin.client import AdminError, split_address

# The admin commands' connection options (broker/admin/cli.py), less --format.
CONNECTION_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("-b", "--bootstrap-server"), {"dest": "bootstrap", "metavar": "HOST:PORT",
                                     "help": "brokers to start from (comma-separated)"}),
    (("--command-config",), {"metavar": "FILE", "help": "client properties "
                             "(security.protocol, sasl.mechanism, ...); without sasl.username"
                             "/password on a SASL cluster the console asks for them"}),
    (("-X",), {"dest": "props", "action": "append", "default": [], "metavar": "KEY=VALUE",
               "help": "a client property (repeatable; wins over --command-config)"}),
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("console", help="serve the web console of a Kafka-compatible cluster",
                       description="Serve the web console: brokers, topics, groups, "
                       "transactions, ACLs and users, messages, throughput.")
    for flags, options in CONNECTION_OPTIONS:
        p.add_argument(*flags, **options)
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="where the console serves HTTP (default 127.0.0.1:8080)")
    p.add_argument("--read-only", action="store_true",
                   help="refuse every change (HTTP 403; nothing is sent to the cluster)")
    p.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                   help="a broker's Prometheus /metrics, for the throughput chart (repeatable)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from aiohttp import web  # lazy: the other commands need no web server

    from .app import Console, make_app

    try:
        console = Console(settings(args), read_only=args.read_only,
                          metrics_urls=list(args.metrics_url))
        host, port = split_address(args.listen)
    except (AdminError, OSError) as e:
        print(f"samsa: {e}", file=sys.stderr)
        return 2
    web.run_app(make_app(console), host=host, port=port, print=lambda msg: print(
        f"samsa console on http://{args.listen}/ (cluster {args.bootstrap})", flush=True))
    return 0
