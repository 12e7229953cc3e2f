"""The admin subcommands of `samsa`: `topic`, `group`, `txn`, `acl`, `user`, `config`,
`reassign`, `elect-leaders`, `produce`, `consume` and `cluster describe`.

Every command takes the connection options of Kafka's tools and librdkafka:
`-b/--bootstrap-server HOST:PORT[,HOST:PORT]`, `--command-config FILE` (a properties file) and
`-X KEY=VALUE` (repeatable; a later one wins over the file). It prints a table, or with
`--format json` a JSON document with fixed keys; on an error it prints Kafka's error name and
message on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Callable
from typing import Any

from . import (
    acls,
    cluster,
    configs,
    groups,
    messages,
    offsets,
    reassign,
    topics,
    txn,
    users,
)
from .client import Admin, AdminError, Settings, load_properties
from .output import as_json, table

Runner = Callable[[Admin, argparse.Namespace], Any]
Printer = Callable[[Any], None]


def _connection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--bootstrap-server", dest="bootstrap", metavar="HOST:PORT",
                   help="brokers to start from (comma-separated)")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties: security.protocol, sasl.mechanism, "
                        "sasl.username, sasl.password, ssl.ca.location, ...")
    p.add_argument("-X", dest="props", action="append", default=[], metavar="KEY=VALUE",
                   help="a client property (repeatable; wins over --command-config)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table for people (default), json for scripts")


def settings(args: argparse.Namespace) -> Settings:
    props = load_properties(args.command_config) if args.command_config else {}
    for item in args.props:
        key, sep, value = item.partition("=")
        if not sep:
            raise AdminError("INVALID_CONFIG", f"-X wants KEY=VALUE, got {item!r}")
        props[key.strip()] = value
    if args.bootstrap:
        props["bootstrap.servers"] = args.bootstrap
    return Settings(props)


def _command(sub: argparse._SubParsersAction, name: str, help_text: str, run: Runner,
             show: Callable[[Any, argparse.Namespace], None]) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_text, description=help_text)
    _connection_options(p)
    p.set_defaults(func=lambda args: execute(args, run, show))
    return p


def execute(args: argparse.Namespace, run: Runner,
            show: Callable[[Any, argparse.Namespace], None]) -> int:
    try:
        with Admin(settings(args)) as admin:
            result = run(admin, args)
    except AdminError as e:
        print(f"samsa: {e.name}: {e.message}" if e.message else f"samsa: {e.name}",
              file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        print(f"samsa: {e}", file=sys.stderr)
        return 1
    if result is None:  # printed as it went (consume --follow)
        return 0
    if args.format == "json":
        as_json(result, sys.stdout)
    else:
        show(result, args)
    return 0


# ---- topic ---------------------------------------------------------------------------------

TOPIC_COLUMNS = (("TOPIC", "name"), ("ID", "topic_id"), ("PARTITIONS", "partitions"),
                 ("REPLICATION-FACTOR", "replication_factor"), ("INTERNAL", "internal"))
PARTITION_COLUMNS = (("PARTITION", "partition"), ("LEADER", "leader"),
                     ("REPLICAS", "replicas"), ("ISR", "isr"),
                     ("OFFLINE", "offline_replicas"))


def _say(template: str) -> Callable[[Any, argparse.Namespace], None]:
    def show(result: Any, args: argparse.Namespace) -> None:
        for item in result if isinstance(result, list) else [result]:
            print(template.format(**item))
    return show


def _show_created(result: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"Created topic {result['name']}." if result["created"]
          else f"Topic {result['name']} already exists.")


def _show_describe(result: list[dict[str, Any]], args: argparse.Namespace) -> None:
    for i, t in enumerate(result):
        if i:
            print()
        configs = ",".join(f"{k}={v}" for k, v in t["configs"].items())
        print(f"Topic: {t['name']}  TopicId: {t['topic_id'] or '-'}  "
              f"PartitionCount: {t['partitions']}  "
              f"ReplicationFactor: {t['replication_factor']}  Configs: {configs}")
        table(t["partition_details"], PARTITION_COLUMNS, sys.stdout)


def _add_topic(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topic", help="create, list, describe, alter and delete topics")
    cmds = p.add_subparsers(dest="topic_command", metavar="COMMAND", required=True)

    c = _command(cmds, "create", "create a topic", lambda a, x: topics.create(
        a, x.name, x.partitions, x.replication_factor, topics.parse_configs(x.config),
        x.if_not_exists), _show_created)
    c.add_argument("name", metavar="TOPIC")
    c.add_argument("-p", "--partitions", type=int, default=-1,
                   help="default: the broker's num.partitions")
    c.add_argument("-r", "--replication-factor", type=int, default=-1,
                   help="default: the broker's default.replication.factor")
    c.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config (repeatable)")
    c.add_argument("--if-not-exists", action="store_true",
                   help="succeed when the topic exists already")

    c = _command(cmds, "list", "list topics", lambda a, x: topics.list_topics(
        a, not x.exclude_internal), lambda r, x: table(r, TOPIC_COLUMNS, sys.stdout))
    c.add_argument("--exclude-internal", action="store_true",
                   help="leave out internal topics (__consumer_offsets, ...)")

    c = _command(cmds, "describe", "partitions, leaders, replicas, ISR and config overrides "
                 "of topics (all when none is named)", lambda a, x: topics.describe(
                     a, x.names or None, not x.exclude_internal), _show_describe)
    c.add_argument("names", nargs="*", metavar="TOPIC")
    c.add_argument("--exclude-internal", action="store_true")

    c = _command(cmds, "delete", "delete topics", lambda a, x: topics.delete(a, x.names),
                 _say("Deleted topic {name}."))
    c.add_argument("names", nargs="+", metavar="TOPIC")

    c = _command(cmds, "alter-config", "set or delete config overrides of a topic",
                 lambda a, x: topics.alter_config(a, x.name, topics.parse_configs(x.set),
                                                  x.delete),
                 _say("Altered the configs of topic {name}."))
    c.add_argument("name", metavar="TOPIC")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--delete", action="append", default=[], metavar="KEY")

    c = _command(cmds, "add-partitions", "raise a topic's partition count",
                 lambda a, x: topics.add_partitions(a, x.name, x.partitions),
                 _say("Topic {name} now has {partitions} partitions."))
    c.add_argument("name", metavar="TOPIC")
    c.add_argument("-p", "--partitions", type=int, required=True, metavar="TOTAL",
                   help="the new partition count (not the number to add)")


# ---- group ---------------------------------------------------------------------------------

GROUP_COLUMNS = (("GROUP", "group_id"), ("TYPE", "type"), ("PROTOCOL", "protocol_type"),
                 ("STATE", "state"), ("COORDINATOR", "coordinator"))
OFFSET_COLUMNS = (("TOPIC", "topic"), ("PARTITION", "partition"),
                  ("CURRENT-OFFSET", "current_offset"), ("LOG-END-OFFSET", "log_end_offset"),
                  ("LAG", "lag"), ("CONSUMER-ID", "member_id"), ("HOST", "host"),
                  ("CLIENT-ID", "client_id"))
RESET_COLUMNS = (("GROUP", "group_id"), ("TOPIC", "topic"), ("PARTITION", "partition"),
                 ("NEW-OFFSET", "new_offset"))


def _show_groups(result: list[dict[str, Any]], args: argparse.Namespace) -> None:
    for i, g in enumerate(result):
        if i:
            print()
        print(f"Group: {g['group_id']}  Type: {g['type']}  State: {g['state']}  "
              f"Assignor: {g['assignor'] or '-'}  Members: {len(g['members'])}")
        table(g["offsets"], OFFSET_COLUMNS, sys.stdout)


def _add_group(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("group", help="list, describe, reset the offsets of and delete groups "
                       "(classic, consumer, share, streams)")
    cmds = p.add_subparsers(dest="group_command", metavar="COMMAND", required=True)

    c = _command(cmds, "list", "groups of every broker, with type and state",
                 lambda a, x: groups.list_groups(a, x.type, x.state),
                 lambda r, x: table(r, GROUP_COLUMNS, sys.stdout))
    c.add_argument("--type", action="append", default=[],
                   choices=("classic", "consumer", "share", "streams"),
                   help="only groups of this type (repeatable)")
    c.add_argument("--state", action="append", default=[], metavar="STATE",
                   help="only groups in this state, e.g. Stable, Empty (repeatable)")

    c = _command(cmds, "describe", "members, committed offsets, log end offsets and lag",
                 lambda a, x: [groups.describe(a, g) for g in x.groups], _show_groups)
    c.add_argument("groups", nargs="+", metavar="GROUP")

    c = _command(cmds, "reset-offsets", "plan (the default, --dry-run) or with --execute commit "
                 "new offsets of an inactive group (a share group's start offsets)",
                 lambda a, x: offsets.reset(a, x.group, x.topic, _strategy(x), x.execute),
                 lambda r, x: table(r, RESET_COLUMNS, sys.stdout))
    c.add_argument("group", metavar="GROUP")
    which = c.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,...]",
                       help="a topic, or some of its partitions (repeatable)")
    which.add_argument("--all-topics", action="store_true",
                       help="every partition the group has committed an offset for")
    to = c.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                    help="the first offset at or after this time (local time without a zone)")
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N")
    mode = c.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")

    c = _command(cmds, "delete", "delete empty groups and their committed offsets",
                 lambda a, x: [offsets.delete(a, g) for g in x.groups],
                 _say("Deleted group {group_id}."))
    c.add_argument("groups", nargs="+", metavar="GROUP")


def _strategy(args: argparse.Namespace) -> offsets.Strategy:
    if args.to_earliest:
        return offsets.Strategy("earliest")
    if args.to_latest:
        return offsets.Strategy("latest")
    if args.to_datetime is not None:
        return offsets.Strategy("datetime", offsets.parse_datetime(args.to_datetime))
    if args.shift_by is not None:
        return offsets.Strategy("shift", args.shift_by)
    return offsets.Strategy("offset", args.to_offset)


# ---- txn -----------------------------------------------------------------------------------

TXN_COLUMNS = (("TRANSACTIONAL-ID", "transactional_id"), ("COORDINATOR", "coordinator"),
               ("PRODUCER-ID", "producer_id"), ("STATE", "state"))
TXN_DESCRIBE_COLUMNS = (("COORDINATOR", "coordinator_id"),
                        ("TRANSACTIONAL-ID", "transactional_id"),
                        ("PRODUCER-ID", "producer_id"), ("EPOCH", "producer_epoch"),
                        ("STATE", "state"), ("TIMEOUT-MS", "timeout_ms"),
                        ("START-TIME-MS", "start_time_ms"), ("DURATION-MS", "duration_ms"),
                        ("PARTITIONS", "partitions"))
PRODUCER_COLUMNS = (("PRODUCER-ID", "producer_id"), ("EPOCH", "producer_epoch"),
                    ("COORDINATOR-EPOCH", "coordinator_epoch"),
                    ("LAST-SEQUENCE", "last_sequence"), ("LAST-TIMESTAMP", "last_timestamp"),
                    ("TXN-START-OFFSET", "current_txn_start_offset"))
HANGING_COLUMNS = (("TOPIC", "topic"), ("PARTITION", "partition"),
                   ("PRODUCER-ID", "producer_id"), ("EPOCH", "producer_epoch"),
                   ("COORDINATOR-EPOCH", "coordinator_epoch"), ("START-OFFSET", "start_offset"),
                   ("LAST-TIMESTAMP", "last_timestamp"), ("DURATION-MIN", "duration_minutes"))


def _show_txn(result: dict[str, Any], args: argparse.Namespace) -> None:
    partitions = [f"{tp['topic']}-{tp['partition']}" for tp in result["topic_partitions"]]
    table([{**result, "partitions": partitions}], TXN_DESCRIBE_COLUMNS, sys.stdout)


def _add_txn(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("txn", help="list, describe and abort transactions; find hanging ones")
    cmds = p.add_subparsers(dest="txn_command", metavar="COMMAND", required=True)

    c = _command(cmds, "list", "transactional ids of every coordinator",
                 lambda a, x: txn.list_transactions(a, x.state, x.producer_id,
                                                    x.duration_filter, x.pattern),
                 lambda r, x: table(r, TXN_COLUMNS, sys.stdout))
    c.add_argument("--state", action="append", default=[], metavar="STATE",
                   help="only in this state, e.g. Ongoing, CompleteCommit (repeatable)")
    c.add_argument("--producer-id", action="append", default=[], type=int, metavar="ID",
                   help="only of this producer id (repeatable)")
    c.add_argument("--duration-filter", type=int, metavar="MS",
                   help="only transactions open longer than MS")
    c.add_argument("--transactional-id-pattern", dest="pattern", metavar="REGEX",
                   help="only transactional ids matching REGEX")

    c = _command(cmds, "describe", "state, producer, timeout, start and partitions of a "
                 "transactional id", lambda a, x: txn.describe(a, x.transactional_id),
                 _show_txn)
    c.add_argument("transactional_id", metavar="TRANSACTIONAL-ID")

    c = _command(cmds, "describe-producers", "the active producers of a partition",
                 lambda a, x: txn.describe_producers(a, x.topic, x.partition, x.broker_id),
                 lambda r, x: table(r, PRODUCER_COLUMNS, sys.stdout))
    _partition_options(c)
    c.add_argument("--broker-id", type=int, help="ask this replica rather than the leader")

    c = _command(cmds, "abort", "abort an open (hanging) transaction on a partition: an abort "
                 "marker written by WriteTxnMarkers (needs ClusterAction)",
                 lambda a, x: txn.abort(a, x.topic, x.partition, x.start_offset,
                                        x.producer_id, x.producer_epoch, x.coordinator_epoch),
                 _say("Aborted the transaction of producer {producer_id} (epoch "
                      "{producer_epoch}) on {topic}-{partition}."))
    _partition_options(c)
    c.add_argument("--start-offset", type=int, help="the transaction's first offset")
    c.add_argument("--producer-id", type=int, help="(without --start-offset)")
    c.add_argument("--producer-epoch", type=int, help="(without --start-offset)")
    c.add_argument("--coordinator-epoch", type=int, help="(without --start-offset)")

    c = _command(cmds, "find-hanging", "open transactions their coordinator will never finish",
                 lambda a, x: txn.find_hanging(a, x.broker_id, x.topic, x.partition,
                                               x.max_transaction_timeout),
                 lambda r, x: table(r, HANGING_COLUMNS, sys.stdout))
    c.add_argument("--broker-id", type=int, help="search the partitions of this broker")
    c.add_argument("--topic", help="search this topic")
    c.add_argument("--partition", type=int, help="only this partition of --topic")
    c.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                   help="skip transactions younger than this (default 15)")


def _partition_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)


# ---- acl -----------------------------------------------------------------------------------

ACL_COLUMNS = (("RESOURCE-TYPE", "resource_type"), ("RESOURCE-NAME", "resource_name"),
               ("PATTERN-TYPE", "pattern_type"), ("PRINCIPAL", "principal"), ("HOST", "host"),
               ("OPERATION", "operation"), ("PERMISSION", "permission"))


def _acl_filter(p: argparse.ArgumentParser, resource_required: bool = False) -> None:
    p.add_argument("--resource-type", required=resource_required, metavar="TYPE",
                   help="topic, group, cluster, transactional-id, delegation-token, user"
                        + (" or any" if resource_required else ""))
    p.add_argument("--resource-name", metavar="NAME")
    p.add_argument("--pattern-type", metavar="TYPE",
                   help="literal, prefixed, match (all that apply to the name) or any "
                        "(the default)")
    p.add_argument("--principal", metavar="TYPE:NAME", help="e.g. User:alice")
    p.add_argument("--host")
    p.add_argument("--operation", metavar="OP", help="e.g. read, write, describe, all")
    p.add_argument("--permission", metavar="allow|deny")


def _show_acls(result: list[dict[str, Any]], args: argparse.Namespace) -> None:
    table(result, ACL_COLUMNS, sys.stdout)


def _filter(args: argparse.Namespace) -> acls.Filter:
    return acls.Filter(args.resource_type, args.resource_name, args.pattern_type,
                       args.principal, args.host, args.operation, args.permission)


def _add_acl(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("acl", help="list, create and delete ACLs")
    cmds = p.add_subparsers(dest="acl_command", metavar="COMMAND", required=True)

    c = _command(cmds, "list", "the ACLs matching the options (all without any)",
                 lambda a, x: acls.list_acls(a, _filter(x)), _show_acls)
    _acl_filter(c)

    c = _command(cmds, "create", "allow (or deny) a principal operations on a resource",
                 lambda a, x: acls.create(a, x.resource_type, x.resource_name, x.pattern_type,
                                          x.principal, x.host, x.operation, x.permission),
                 _show_acls)
    c.add_argument("--resource-type", required=True, metavar="TYPE",
                   help="topic, group, cluster, transactional-id, delegation-token, user")
    c.add_argument("--resource-name", metavar="NAME", help="(a cluster's is kafka-cluster)")
    c.add_argument("--pattern-type", default="literal", metavar="TYPE",
                   help="literal (default) or prefixed")
    c.add_argument("--principal", required=True, metavar="TYPE:NAME", help="e.g. User:alice")
    c.add_argument("--host", default="*", help="default: every host")
    c.add_argument("--operation", action="append", required=True, metavar="OP",
                   help="read, write, create, delete, alter, describe, cluster-action, "
                        "describe-configs, alter-configs, idempotent-write, all ... "
                        "(repeatable)")
    c.add_argument("--permission", default="allow", metavar="allow|deny")

    c = _command(cmds, "delete", "delete the ACLs matching the options",
                 lambda a, x: acls.delete(a, _filter(x)), _show_acls)
    _acl_filter(c, resource_required=True)


# ---- user ----------------------------------------------------------------------------------

USER_COLUMNS = (("USER", "user"), ("MECHANISM", "mechanism"), ("ITERATIONS", "iterations"))


def _show_users(result: list[dict[str, Any]], args: argparse.Namespace) -> None:
    rows = [{"user": u["user"], **c} for u in result for c in u["credentials"]]
    table(rows, USER_COLUMNS, sys.stdout)


def _password(args: argparse.Namespace) -> str:
    """--password, else asked for on a terminal, else the first line of stdin (for scripts:
    a password on the command line shows in the process list)."""
    if args.password is not None:
        return str(args.password)
    if sys.stdin.isatty():
        return getpass.getpass(f"Password of {args.user}: ")
    return sys.stdin.readline().rstrip("\n")


def _add_user(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("user", help="SCRAM credentials of users")
    cmds = p.add_subparsers(dest="user_command", metavar="COMMAND", required=True)
    mechanism_help = "SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable)"

    _command(cmds, "list", "every user with SCRAM credentials, with mechanisms and iterations",
             lambda a, x: users.describe(a, None), _show_users)

    c = _command(cmds, "describe", "the SCRAM mechanisms and iterations of users",
                 lambda a, x: users.describe(a, x.users), _show_users)
    c.add_argument("users", nargs="+", metavar="USER")

    c = _command(cmds, "set-scram", "create or replace a user's SCRAM credentials (salted "
                 "here: the password is not sent)",
                 lambda a, x: users.set_scram(a, x.user, x.mechanism, _password(x),
                                              x.iterations),
                 lambda r, x: print(f"Set the {','.join(r['set'])} credentials of user "
                                    f"{r['user']}."))
    c.add_argument("user", metavar="USER")
    c.add_argument("--mechanism", action="append", required=True, help=mechanism_help)
    c.add_argument("--password", help="default: asked for, or read from stdin")
    c.add_argument("--iterations", type=int, default=users.DEFAULT_ITERATIONS,
                   help=f"default {users.DEFAULT_ITERATIONS}")

    c = _command(cmds, "delete-scram", "delete a user's SCRAM credentials",
                 lambda a, x: users.delete_scram(a, x.user, x.mechanism),
                 lambda r, x: print(f"Deleted the {','.join(r['deleted'])} credentials of "
                                    f"user {r['user']}."))
    c.add_argument("user", metavar="USER")
    c.add_argument("--mechanism", action="append", required=True, help=mechanism_help)


# ---- config --------------------------------------------------------------------------------

CONFIG_COLUMNS = (("NAME", "name"), ("VALUE", "value"), ("SOURCE", "source"),
                  ("SENSITIVE", "sensitive"), ("READ-ONLY", "read_only"))


def _entity(p: argparse.ArgumentParser) -> None:
    p.add_argument("--entity-type", required=True, choices=tuple(configs.ENTITY_TYPES))
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--entity-name", metavar="NAME",
                       help="a topic, group or subscription name, or a broker id")
    which.add_argument("--entity-default", action="store_true",
                       help="the cluster-wide default of every broker")


def _show_configs(result: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"Configs of {result['entity_type']} {result['entity_name'] or '(default)'}:")
    table(result["configs"], CONFIG_COLUMNS, sys.stdout)


def _show_altered(result: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"Altered the configs of {result['entity_type']} "
          f"{result['entity_name'] or '(default)'}.")


def _add_config(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="describe, set and delete configs of brokers, topics, "
                       "groups and client-metrics subscriptions")
    cmds = p.add_subparsers(dest="config_command", metavar="COMMAND", required=True)

    c = _command(cmds, "describe", "the configs set on an entity (all of them with --all)",
                 lambda a, x: configs.describe(a, x.entity_type, x.entity_name or "", x.all,
                                               x.key), _show_configs)
    _entity(c)
    c.add_argument("--all", action="store_true", help="defaults and static values too")
    c.add_argument("--key", action="append", default=[], metavar="KEY",
                   help="only this config (repeatable)")

    c = _command(cmds, "set", "set configs (IncrementalAlterConfigs SET)",
                 lambda a, x: configs.alter(a, x.entity_type, x.entity_name or "",
                                            topics.parse_configs(x.configs), []),
                 _show_altered)
    _entity(c)
    c.add_argument("configs", nargs="+", metavar="KEY=VALUE")

    c = _command(cmds, "delete", "delete configs, back to their defaults (DELETE)",
                 lambda a, x: configs.alter(a, x.entity_type, x.entity_name or "", {},
                                            x.keys), _show_altered)
    _entity(c)
    c.add_argument("keys", nargs="+", metavar="KEY")


# ---- produce / consume ---------------------------------------------------------------------

PRODUCED_COLUMNS = (("PARTITION", "partition"), ("BASE-OFFSET", "base_offset"),
                    ("COUNT", "count"))


def _headers(items: list[str]) -> list[tuple[str, bytes]]:
    return [(k, v.encode()) for k, v in topics.parse_configs(items).items()]


def _produce(admin: Admin, args: argparse.Namespace) -> dict[str, Any]:
    lines = messages.parse_lines(sys.stdin, args.key_separator, _headers(args.header))
    return messages.produce(admin, args.topic, lines, args.partition, args.acks,
                            args.transactional_id, args.compression)


def _show_produced(result: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"Produced {result['records']} records to {result['topic']}"
          + (" in one transaction." if result["transactional_id"] else "."))
    table(result["partitions"], PRODUCED_COLUMNS, sys.stdout)


def _show_consumed(result: list[dict[str, Any]], args: argparse.Namespace) -> None:
    for r in result:
        _print_record(r, args)


def _print_record(r: dict[str, Any], args: argparse.Namespace) -> None:
    if args.format == "json":  # with --follow: one JSON object a line
        print(json.dumps(r), flush=True)
        return
    value = "null" if r["value"] is None else r["value"]
    print(f"{r['key']}{args.separator}{value}" if args.print_key else value, flush=True)


def _consume(admin: Admin, args: argparse.Namespace) -> list[dict[str, Any]] | None:
    if not args.follow:
        return messages.consume(admin, args.topic, args.partition, args.from_beginning,
                                args.offset, args.group, args.isolation, args.max_messages)
    count = [0]

    def emit(record: dict[str, Any]) -> None:
        _print_record(record, args)
        count[0] += 1

    try:
        messages.follow(admin, args.topic, emit, args.partition, args.from_beginning,
                        args.offset, args.group, args.isolation, args.max_messages)
    except KeyboardInterrupt:
        pass  # the end of a follow (the group's offsets are committed on the way out)
    print(f"Processed a total of {count[0]} messages", file=sys.stderr)
    return None


def _add_messages(sub: argparse._SubParsersAction) -> None:
    c = _command(sub, "produce", "write stdin's lines to a topic, one record each", _produce,
                 _show_produced)
    c.add_argument("topic", metavar="TOPIC")
    c.add_argument("-p", "--partition", type=int,
                   help="default: by key (murmur2, as Kafka's partitioner), else round robin")
    c.add_argument("-K", "--key-separator", metavar="SEP",
                   help="each line is KEY SEP VALUE (default: no key)")
    c.add_argument("-H", "--header", action="append", default=[], metavar="KEY=VALUE",
                   help="a header of every record (repeatable)")
    c.add_argument("--acks", default="all", choices=tuple(messages.ACKS))
    c.add_argument("--transactional-id", metavar="ID",
                   help="write the records as one committed transaction")
    c.add_argument("--compression", default="none", choices=tuple(messages.CODECS),
                   help="the batches' codec (as compression.type names it)")

    c = _command(sub, "consume", "read a topic's records up to its end (or -n, or with "
                 "--follow until interrupted)", _consume, _show_consumed)
    c.add_argument("topic", metavar="TOPIC")
    c.add_argument("-p", "--partition", type=int, help="only this partition")
    start = c.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="from each partition's start (default: the group's offsets, else "
                            "the end)")
    start.add_argument("--offset", type=int, help="from this offset of each partition")
    c.add_argument("-g", "--group", help="join this classic group, read the partitions it "
                   "assigns from its offsets and commit as its member")
    c.add_argument("--isolation", default="read_uncommitted",
                   choices=("read_uncommitted", "read_committed"))
    c.add_argument("-n", "--max-messages", type=int, metavar="N")
    c.add_argument("-f", "--follow", action="store_true",
                   help="keep fetching past the end until interrupted (or -n); with "
                        "--format json one record a line")
    c.add_argument("--print-key", action="store_true", help="print KEY SEPARATOR VALUE")
    c.add_argument("--separator", default="\t", help="between key and value (default tab)")


# ---- reassign / elect-leaders --------------------------------------------------------------

MOVE_COLUMNS = (("TOPIC", "topic"), ("PARTITION", "partition"), ("REPLICAS", "replicas"))
ONGOING_COLUMNS = (("TOPIC", "topic"), ("PARTITION", "partition"), ("REPLICAS", "replicas"),
                   ("ADDING", "adding"), ("REMOVING", "removing"))
ELECTION_COLUMNS = (("TOPIC", "topic"), ("PARTITION", "partition"), ("RESULT", "result"))


def _progress(line: str) -> None:
    print(f"samsa: {line}", file=sys.stderr, flush=True)


def _plan(args: argparse.Namespace) -> dict[reassign.TP, list[int] | None]:
    plan: dict[reassign.TP, list[int] | None] = {}
    if args.reassignment_json_file:
        plan.update(reassign.load_plan(args.reassignment_json_file))
    plan.update(reassign.parse_move(m) for m in args.move)
    if not plan:
        raise AdminError("INVALID_REQUEST", "nothing to reassign: give --move or "
                         "--reassignment-json-file")
    return plan


def _show_reassigned(result: dict[str, Any], args: argparse.Namespace) -> None:
    print("Reassigned" if result["done"] else "Started reassigning",
          f"{len(result['partitions'])} partition(s)"
          + (f" in {result['seconds']} s." if result["done"] else "."))
    table(result["partitions"], MOVE_COLUMNS, sys.stdout)


def _add_reassign(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reassign", help="move partitions' replicas between brokers")
    cmds = p.add_subparsers(dest="reassign_command", metavar="COMMAND", required=True)

    c = _command(cmds, "execute", "start reassignments (and with --wait follow them to the "
                 "end)", lambda a, x: reassign.execute(a, _plan(x), x.wait, x.timeout,
                                                       _progress), _show_reassigned)
    c.add_argument("--move", action="append", default=[], metavar="TOPIC:PARTITION=B1,B2",
                   help="the partition's new replicas, the first preferred leader (repeatable)")
    c.add_argument("--reassignment-json-file", metavar="FILE",
                   help="kafka-reassign-partitions.sh's JSON")
    c.add_argument("--wait", action="store_true",
                   help="follow the reassignment until done, progress on stderr")
    c.add_argument("--timeout", type=float, default=600, metavar="SECONDS",
                   help="with --wait: give up following after this long (default 600)")

    c = _command(cmds, "list", "reassignments in progress",
                 lambda a, x: reassign.ongoing(a), lambda r, x: table(r, ONGOING_COLUMNS,
                                                                      sys.stdout))

    c = _command(cmds, "cancel", "cancel reassignments in progress (back to the replicas "
                 "before)", lambda a, x: reassign.alter(a, dict.fromkeys(
                     reassign.parse_partition(s) for s in x.partitions)),
                 _say("Cancelled the reassignment of {topic}-{partition}."))
    c.add_argument("partitions", nargs="+", metavar="TOPIC:PARTITION")

    c = _command(sub, "elect-leaders", "elect the preferred (or, unclean, any) replica "
                 "leader of partitions", lambda a, x: reassign.elect_leaders(
                     a, x.election_type, _elect_partitions(a, x)),
                 lambda r, x: table(r, ELECTION_COLUMNS, sys.stdout))
    c.add_argument("--election-type", required=True, choices=tuple(reassign.ELECTION_TYPES))
    which = c.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="every partition of this topic (or --partition)")
    which.add_argument("--all-topic-partitions", action="store_true")
    c.add_argument("--partition", type=int, help="only this partition of --topic")


def _elect_partitions(admin: Admin, args: argparse.Namespace) -> set[reassign.TP] | None:
    if args.all_topic_partitions:
        return None
    if args.partition is not None:
        return {(args.topic, args.partition)}
    (t,) = admin.metadata([args.topic]).topics
    topics.check_found(t)
    return {(args.topic, int(p.partition_index)) for p in t.partitions}


# ---- cluster -------------------------------------------------------------------------------

BROKER_COLUMNS = (("ID", "id"), ("HOST", "host"), ("PORT", "port"), ("RACK", "rack"))


def _show_cluster(result: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"Cluster: {result['cluster_id']}  Controller: {result['controller_id']}")
    table(result["brokers"], BROKER_COLUMNS, sys.stdout)


def add_cluster_describe(cmds: argparse._SubParsersAction) -> None:
    """`samsa cluster describe` (beside `samsa cluster --brokers N`, which runs a cluster)."""
    _command(cmds, "describe", "cluster id, controller and brokers",
             lambda a, x: cluster.describe(a), _show_cluster)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    _add_topic(sub)
    _add_group(sub)
    _add_txn(sub)
    _add_acl(sub)
    _add_user(sub)
    _add_config(sub)
    _add_messages(sub)
    _add_reassign(sub)
