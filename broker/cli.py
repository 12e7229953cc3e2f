"""`samsa` command line: `samsa serve`, `samsa cluster`, `samsa dump-log`, `samsa check-log`,
and the admin commands `samsa topic|group ...` and `samsa cluster describe` (broker/admin/)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from samsa.config.loader import load_config, parse_override
from samsa.config.schema import LOG_LEVELS, BrokerConfig, ConfigError, parse_logger_levels

from .admin.cli import add_cluster_describe
from .admin.cli import add_parsers as add_admin_parsers
from .cluster.features import initial_levels
from .console.cli import add_parser as add_console_parser

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Override(argparse.Action):
    """Append (property, value) to one shared list, so flags apply in command-line order
    (a later flag wins) whatever their spelling."""

    def __init__(self, *args: Any, prop: str | None = None,
                 convert: Callable[[str], str] = str, **kwargs: Any) -> None:
        self.prop = prop
        self.convert = convert
        super().__init__(*args, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        items = list(getattr(namespace, self.dest, None) or [])
        items.append((self.prop, self.convert(values)))
        setattr(namespace, self.dest, items)


def _listen_to_listener(value: str) -> str:
    return value if "://" in value else f"PLAINTEXT://{value}"


def _add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run a broker until SIGTERM/SIGINT")
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="YAML file of Kafka broker properties")
    ov: dict[str, Any] = {"dest": "overrides", "action": _Override, "default": []}
    p.add_argument("--data-dir", metavar="DIR", prop="log.dirs", help="sets log.dirs", **ov)
    p.add_argument("--listen", metavar="HOST:PORT", prop="listeners",
                   convert=_listen_to_listener, help="sets listeners to PLAINTEXT://HOST:PORT",
                   **ov)
    p.add_argument("--broker-id", metavar="N", prop="node.id", help="sets node.id", **ov)
    p.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", prop="zookeeper.connect",
                   help="sets zookeeper.connect: join the cluster whose metadata lives there",
                   **ov)
    p.add_argument("--set", metavar="KEY=VALUE", help="set any broker property (repeatable)",
                   **ov)
    p.add_argument("--processes", type=_processes, default=1, metavar="N|auto",
                   help="run the node as N broker processes (auto: one per core), ids and ports "
                   "counted up from --broker-id and each listener's port (docs/design/cores.md)")
    p.set_defaults(func=_serve)


def _processes(value: str) -> int:
    from .node.supervisor import processes_arg

    try:
        return processes_arg(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _add_cluster(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="run a local ZooKeeper and K brokers (or K nodes of "
                       "N processes) on loopback until Ctrl-C/SIGTERM; `cluster describe` "
                       "describes a running cluster")
    # Required unless a subcommand (`samsa cluster describe`) is given: checked in _cluster.
    p.add_argument("--brokers", type=int, metavar="K",
                   help="number of brokers (ids 0..K-1), or of nodes with --processes")
    p.add_argument("--processes", type=int, default=1, metavar="N",
                   help="run each of the K nodes as `samsa serve --processes N`: node k is "
                   "brokers kN..kN+N-1 on ports PORT+kN.., in DIR/node-<k> (its output in "
                   "node.log), its processes sharing broker.rack node-<k> (default 1: plain "
                   "brokers)")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="DIR/zookeeper and DIR/broker-<i> (each with its broker.log)")
    p.add_argument("--base-port", type=int, default=9092, metavar="PORT",
                   help="broker i listens on PORT+i (default 9092)")
    p.add_argument("--zk-port", type=int, default=2181, metavar="PORT",
                   help="ZooKeeper's client port (default 2181)")
    p.add_argument("--host", default="127.0.0.1",
                   help="loopback address ZooKeeper and the brokers bind (default 127.0.0.1)")
    p.add_argument("--set", dest="settings", action="append", default=[],
                   metavar="KEY=VALUE", help="broker property for every broker (repeatable)")
    p.set_defaults(func=_cluster)
    add_cluster_describe(p.add_subparsers(dest="cluster_command", metavar="COMMAND"))


def _cluster(args: argparse.Namespace) -> int:
    from samsa.broker.cluster.local_cluster import run_cluster

    if args.brokers is None or args.data_dir is None:
        print("samsa cluster: --brokers and --data-dir are required to run a cluster "
              "(or `samsa cluster describe -b HOST:PORT`)", file=sys.stderr)
        return 2

    logging.basicConfig(stream=sys.stderr, format=LOG_FORMAT, level=logging.INFO, force=True)
    return run_cluster(args.brokers, args.data_dir, base_port=args.base_port,
                       zk_port=args.zk_port, host=args.host, settings=args.settings,
                       processes=args.processes)


def _add_dump_log(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dump-log", help="print log segments, indexes and producer snapshots "
                       "(like Kafka's DumpLogSegments; __consumer_offsets records are decoded)")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="a .log segment, .index, .timeindex, .txnindex or .snapshot file")
    p.add_argument("--deep-iteration", action="store_true", help="print every record too")
    p.add_argument("--print-data-log", action="store_true",
                   help="print record keys and values (implies --deep-iteration)")
    p.set_defaults(func=_dump_log)


def _dump_log(args: argparse.Namespace) -> int:
    from samsa.coordinator.group.dump_log import dump_segment
    from samsa.storage.dump import SUFFIXES, dump_file

    for path in args.paths:
        try:
            if path.suffix in SUFFIXES:
                dump_file(path)
            else:
                dump_segment(path, deep=args.deep_iteration, print_data=args.print_data_log)
        except OSError as e:
            print(f"samsa: cannot read {path}: {e.strerror}", file=sys.stderr)
            return 1
    return 0


def _add_check_log(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-log", help="verify a data directory offline (CRCs, offsets, "
                       "torn tails, indexes, producer snapshots); exit 1 on problems")
    p.add_argument("data_dir", type=Path, metavar="DIR", help="the broker's log.dirs")
    p.add_argument("--quiet", action="store_true", help="print problems and the summary only")
    p.set_defaults(func=_check_log)


def _check_log(args: argparse.Namespace) -> int:
    from samsa.storage.check import check_data_dir

    if not args.data_dir.is_dir():
        print(f"samsa: {args.data_dir} is not a directory", file=sys.stderr)
        return 2

    def progress(what: str) -> None:
        if not args.quiet:
            print(f"checking {what}", file=sys.stderr)

    reports = check_data_dir(args.data_dir, progress)
    problems = 0
    for r in reports:
        span = f"offsets {r.first_offset}..{r.next_offset}" if r.batches else "empty"
        print(f"{r.name}: {r.segments} segments, {r.batches} batches, {r.records} records, "
              f"{r.bytes} bytes, {span}: {'OK' if not r.problems else 'PROBLEMS'}")
        for problem in r.problems:
            print(f"  {problem}")
        problems += len(r.problems)
    print(f"{len(reports)} partitions checked, {problems} problems")
    return 1 if problems else 0


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    """The flags' properties, in command-line order (a later flag wins)."""
    overrides: dict[str, str] = {}
    for prop, value in args.overrides:
        if prop is None:  # --set key=value
            prop, value = parse_override(value)
        overrides.pop(prop, None)  # re-insert so the last flag is last
        overrides[prop] = value
    return overrides


def build_config(args: argparse.Namespace) -> BrokerConfig:
    """The serve command's config: the YAML file, then flags in command-line order."""
    config = load_config(args.config, _overrides(args))
    initial_levels(config)  # checked against the features this broker supports
    return config


def _level(name: str) -> int:
    return logging.WARNING if name == "WARN" else logging.getLevelName(name)


def setup_logging(config: BrokerConfig) -> None:
    """samsa.log.level for the root logger, samsa.log.loggers for single modules."""
    logging.basicConfig(stream=sys.stderr, format=LOG_FORMAT,
                        level=_level(str(config["samsa.log.level"])), force=True)
    loggers = config["samsa.log.loggers"]
    if loggers:
        for name, level in parse_logger_levels(loggers, LOG_LEVELS).items():
            logging.getLogger(_logger_name(name)).setLevel(_level(level))


# Logger names are module paths, under samsa. since the packages are installed under that one
# name; a name of before, without the samsa. prefix, still means the same module.
_PACKAGES = ("broker", "config", "coordinator", "protocol", "storage")


def _logger_name(name: str) -> str:
    return f"samsa.{name}" if name.split(".")[0] in _PACKAGES else name


def _serve(args: argparse.Namespace) -> int:
    try:
        config = build_config(args)
    except ConfigError as e:
        print(f"samsa: config error: {e}", file=sys.stderr)
        return 2
    setup_logging(config)
    if args.processes > 1:
        from .node.supervisor import run_node

        return run_node(args.config, _overrides(args), args.processes,
                        lambda line: print(line, file=sys.stderr))
    from samsa.broker import app  # lazy: the CLI must load even where the broker cannot

    from .node.layout import LayoutError, check_not_a_node

    try:  # one process over a node's directory would start empty
        check_not_a_node(config)
    except LayoutError as e:
        print(f"samsa: {e}", file=sys.stderr)
        return 2
    return app.run(config)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="samsa", description="Kafka-compatible broker")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Each subcommand registers itself here.
    for add in (_add_serve, _add_cluster, _add_dump_log, _add_check_log, add_admin_parsers,
                add_console_parser):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits on --help and usage errors
        return e.code if isinstance(e.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
