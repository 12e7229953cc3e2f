"""The body of each page, from what data.py gathered."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from .html import Raw, decode, esc, hidden, link, size, table, when


def brokers(info: dict[str, Any], metrics: bool) -> str:
    rows = []
    for b in info["brokers"]:
        health = (Raw('<span class="ok">up</span>') if b["up"]
                  else Raw(f'<span class="bad">down</span> {esc(b["error"])}'))
        dirs = "; ".join(_log_dir(d) for d in b["log_dirs"])
        controller = "yes" if b["id"] == info["controller_id"] else ""
        rows.append((b["id"], f"{b['host']}:{b['port']}", b["rack"] or "", controller, health,
                     b["latency_ms"] if b["latency_ms"] is not None else "", b["leaders"],
                     b["lagging_replicas"], dirs))
    out = (f"<p>Cluster id <code id='cluster-id'>{esc(info['cluster_id'])}</code></p>"
           + table(("ID", "Address", "Rack", "Controller", "Health", "Answer (ms)", "Leaders",
                    "Replicas out of ISR", "Log dirs"), rows, "brokers"))
    if metrics:
        out += THROUGHPUT
    return out


def _log_dir(d: dict[str, Any]) -> str:
    if d["path"] is None:
        return f"not described ({d['error']})"
    space = f"{d['path']}: {size(d['usable_bytes'])} free of {size(d['total_bytes'])}"
    return space + (f" ({d['error']})" if d["error"] else "")


# Polls /throughput every 2 s and hands each answer, with the one before it, to `show`.
POLL = """
<script>
function pollThroughput(show){
  let last=null;
  async function tick(){
    try{
      const now=await (await fetch('/throughput')).json();
      if(last && !now.error) show(now, last, (now.time-last.time)||1);
      if(!now.error) last=now;
    }catch(e){}
    setTimeout(tick,2000);
  }
  tick();
}
</script>
"""

# A small chart of the brokers' byte and record rates.
THROUGHPUT = POLL + """
<h2>Throughput</h2>
<p id="rates">bytes in/s: <b id="bytes-in">…</b> · bytes out/s: <b id="bytes-out">…</b>
· records in/s: <b id="records-in">…</b></p>
<svg id="chart" width="600" height="120" style="border:1px solid #ccc">
<polyline id="line-in" fill="none" stroke="#2a7" stroke-width="2" points=""/>
<polyline id="line-out" fill="none" stroke="#27a" stroke-width="2" points=""/></svg>
<script>
(function(){
  const ins=[], outs=[];
  function draw(id, values, max){
    const pts=values.map((v,i)=>`${i*600/59},${118-v*110/max}`).join(' ');
    document.getElementById(id).setAttribute('points', pts);
  }
  pollThroughput((now, last, dt)=>{
    const r=k=>Math.max(0,(now[k]-last[k])/dt);
    document.getElementById('bytes-in').textContent=r('bytes_in').toFixed(0);
    document.getElementById('bytes-out').textContent=r('bytes_out').toFixed(0);
    document.getElementById('records-in').textContent=r('records_in').toFixed(0);
    ins.push(r('bytes_in')); outs.push(r('bytes_out'));
    if(ins.length>60){ins.shift();outs.shift();}
    const max=Math.max(1,...ins,...outs);
    draw('line-in',ins,max); draw('line-out',outs,max);
  });
})();
</script>
"""

# Each topic's rates in its row of the topics table.
TOPIC_RATES = POLL + """
<script>
pollThroughput((now, last, dt)=>{
  for(const cell of document.querySelectorAll('span.rate')){
    const a=(last.topics[cell.dataset.topic]||{})[cell.dataset.key]||0;
    const b=(now.topics[cell.dataset.topic]||{})[cell.dataset.key]||0;
    cell.textContent=Math.max(0,(b-a)/dt).toFixed(0);
  }
});
</script>
"""


def topics(rows: list[dict[str, Any]], read_only: bool, csrf: str, metrics: bool) -> str:
    headers = ["Topic", "Partitions", "Replication factor", "Under-replicated", "Offline",
               "Size (leaders)", "Internal"]
    if metrics:
        headers += ["In (B/s)", "Out (B/s)", "Records in/s"]
    table_rows = []
    for t in rows:
        row: list[Any] = [link(f"/topics/{quote(t['name'], safe='')}", t["name"]),
                          t["partitions"], t["replication_factor"], t["under_replicated"],
                          t["offline"], size(t["size"]), "yes" if t["internal"] else ""]
        if metrics:
            row += [Raw(f'<span class="rate" data-topic="{esc(t["name"])}" data-key="{k}">'
                        "</span>") for k in ("bytes_in", "bytes_out", "records_in")]
        table_rows.append(row)
    body = table(headers, table_rows, "topics") + (TOPIC_RATES if metrics else "")
    if read_only:
        return body
    return body + f"""<h2>Create a topic</h2>
<form method="post" action="/topics" id="create-topic">{hidden({"csrf": csrf})}
<label>Name <input name="name" required></label>
<label>Partitions <input name="partitions" type="number" min="1" value="1"></label>
<label>Replication factor <input name="replication_factor" type="number" min="-1" value="-1">
</label>
<label>Configs <input name="configs" placeholder="retention.ms=86400000, ..."></label>
<button type="submit">Create</button></form>"""


def topic(t: dict[str, Any], read_only: bool, csrf: str) -> str:
    name = quote(t["name"], safe="")
    rows = []
    for p in t["partitions"]:
        isr_ok = set(p["isr"]) >= set(p["replicas"])
        sizes = ", ".join(f"{r}: {size(s)}" for r, s in p["sizes"].items() if s is not None)
        rows.append((p["partition"], p["leader"], ", ".join(map(str, p["replicas"])),
                     Raw(f'<span class="{"ok" if isr_ok else "bad"}">'
                         f'{esc(", ".join(map(str, p["isr"])))}</span>'),
                     p["start_offset"], p["end_offset"], sizes,
                     link(f"/topics/{name}/messages?partition={p['partition']}", "browse")))
    body = table(("Partition", "Leader", "Replicas", "ISR", "Start offset", "End offset",
                  "Size per replica", "Messages"), rows, "partitions")
    if read_only or t["internal"]:
        return body
    return body + _post_button(f"/topics/{name}/delete", {}, "Delete topic", csrf)


def groups(rows: list[dict[str, Any]]) -> str:
    summary = table(("Group", "Type", "Protocol", "State", "Coordinator", "Members", "Lag"),
                    [(link(f"#g-{g['group_id']}", g["group_id"]), g["type"] or "",
                      g.get("protocol_type") or "", g.get("state") or "",
                      g.get("coordinator", ""), len(g["members"]),
                      sum(o["lag"] or 0 for o in g["offsets"])) for g in rows], "groups")
    return summary + "".join(_group(g) for g in rows)


def _group(g: dict[str, Any]) -> str:
    gid = esc(g["group_id"])
    out = f'<section id="g-{gid}" data-group="{gid}"><h2>{gid}</h2>'
    if g.get("error"):
        return out + f'<p class="bad">not described: {esc(g["error"])}</p></section>'
    members = [(m["member_id"], m["client_id"], m["host"],
                "" if m.get("member_epoch") is None else m["member_epoch"],
                "; ".join(f"{a['topic']}: {', '.join(map(str, a['partitions']))}"
                          for a in m["assignment"])) for m in g["members"]]
    out += table(("Member", "Client", "Host", "Epoch", "Assignment"), members)
    offsets = [(o["topic"], o["partition"], _n(o["current_offset"]), _n(o["log_end_offset"]),
                _n(o["lag"]), o["member_id"] or "") for o in g["offsets"]]
    out += table(("Topic", "Partition", "Committed offset", "Log end offset", "Lag", "Member"),
                 offsets, f"offsets-{g['group_id']}")
    return out + "</section>"


def _n(value: int | None) -> Any:
    return "-" if value is None else value


def messages(m: dict[str, Any], fmt: str, limit: int) -> str:
    base = f"/topics/{quote(m['topic'], safe='')}/messages"
    isolation = "read_committed" if m["committed"] else "read_uncommitted"
    query = {"partition": m["partition"], "offset": m["from_offset"], "limit": limit,
             "format": fmt, "isolation": isolation}

    def view(text: str, **change: Any) -> str:
        return str(link(f"{base}?{urlencode({**query, **change})}", text))

    formats = " ".join(view(f, format=f) for f in ("text", "json", "hex"))
    which = (view("all records", isolation="read_uncommitted") + " · " +
             view("committed only", isolation="read_committed"))
    head = (f"<p>Partition {m['partition']}: offsets {m['start_offset']} to "
            f"{m['end_offset']}; from {m['from_offset']}"
            f"{', committed records only' if m['committed'] else ''}. Show as {formats}; "
            f"{which}.</p>"
            f'<form method="get" action="{esc(base)}">'
            f'{hidden({"format": fmt, "isolation": isolation})}'
            f'<label>Partition <input name="partition" value="{m["partition"]}" size="4">'
            f'</label><label>Offset <input name="offset" value="{m["from_offset"]}" size="8">'
            f'</label><label>Count <input name="limit" value="{limit}" size="4"></label>'
            "<button>Go</button></form>")
    rows = [(r["offset"], when(r["timestamp"]), Raw(f"<pre>{esc(decode(r['key'], fmt))}</pre>"),
             Raw(f"<pre>{esc(decode(r['value'], fmt))}</pre>"),
             "; ".join(f"{k}={decode(v, 'text')}" for k, v in r["headers"]))
            for r in m["records"]]
    return head + table(("Offset", "Timestamp", "Key", "Value", "Headers"), rows, "messages")


def transactions(txns: list[dict[str, Any]], open_txns: list[dict[str, Any]],
                 max_minutes: int, read_only: bool) -> str:
    rows = [(t["transactional_id"], t["producer_id"], t.get("producer_epoch", ""), t["state"],
             t["coordinator"], t.get("timeout_ms", ""), when(t.get("start_time_ms")),
             "; ".join(f"{tp['topic']}-{tp['partition']}"
                       for tp in t.get("topic_partitions", [])), t["error"] or "")
            for t in txns]
    out = table(("Transactional id", "Producer id", "Epoch", "State", "Coordinator",
                 "Timeout (ms)", "Started", "Partitions", "Error"), rows, "transactions")
    out += (f"<h2>Open transactions on partitions</h2><form method='get'><label>Hanging when "
            f"open longer than <input name='max_minutes' value='{max_minutes}' size='4'> "
            "minutes and not in its coordinator's transaction</label> <button>Look</button>"
            "</form>")
    open_rows = []
    for o in open_txns:
        action: Any = ""
        if o["hanging"] and not read_only:
            action = link("/transactions/abort?" + urlencode(
                {k: o[k] for k in ABORT_FIELDS[:-1]} | {
                    "start_offset": o["current_txn_start_offset"]}), "abort…")
        open_rows.append((o["topic"], o["partition"], o["producer_id"], o["producer_epoch"],
                          o["coordinator_epoch"], o["current_txn_start_offset"],
                          when(o["last_timestamp"]), round(o["duration_ms"] / 60000, 1),
                          o["transactional_id"] or "",
                          Raw('<span class="bad">hanging</span>') if o["hanging"] else "open",
                          action))
    return out + table(("Topic", "Partition", "Producer id", "Epoch", "Coordinator epoch",
                        "Start offset", "Last record", "Duration (min)", "Transactional id",
                        "Status", ""), open_rows, "open-transactions")


# What the abort's confirmation carries: the marker is written for the transaction open at the
# start offset, as `kafka-transactions.sh abort --start-offset` finds it; the producer is shown.
ABORT_FIELDS = ("topic", "partition", "producer_id", "producer_epoch", "start_offset")


def confirm_abort(fields: dict[str, str], csrf: str) -> str:
    return (f"<p id='confirm-text'>Abort the open transaction of producer "
            f"{esc(fields['producer_id'])} (epoch {esc(fields['producer_epoch'])}) on "
            f"{esc(fields['topic'])}-{esc(fields['partition'])}, from offset "
            f"{esc(fields['start_offset'])}? An abort marker is written to the partition: its "
            "records are dropped for read_committed consumers.</p>"
            f'<form method="post" action="/transactions/abort" id="confirm-abort">'
            f'{hidden({**fields, "csrf": csrf})}<button type="submit">Abort the transaction'
            '</button> <a href="/transactions">cancel</a></form>')


ACL_FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host",
              "operation", "permission")
ACL_CHOICES = {
    "resource_type": ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN",
                      "USER"),
    "pattern_type": ("LITERAL", "PREFIXED"),
    "operation": ("READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
                  "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS",
                  "DESCRIBE_TOKENS", "TWO_PHASE_COMMIT", "ALL"),
    "permission": ("ALLOW", "DENY")}
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _select(name: str, choices: tuple[str, ...]) -> str:
    return (f'<select name="{name}">'
            + "".join(f"<option>{esc(c)}</option>" for c in choices) + "</select>")


def _post_button(action: str, fields: dict[str, Any], label: str, csrf: str) -> Raw:
    """A one-button form whose post the browser confirms first."""
    return Raw(f'<form class="inline" method="post" action="{esc(action)}" '
               f"onsubmit=\"return confirm('{esc(label)}?')\">"
               f'{hidden({**fields, "csrf": csrf})}<button type="submit">{esc(label)}</button>'
               "</form>")


def security(acls: dict[str, Any], users: list[dict[str, Any]], read_only: bool,
             csrf: str) -> str:
    if not acls["enabled"]:
        out = "<p id='no-authorizer'>No authorizer is configured: the cluster has no ACLs.</p>"
    else:
        rows = [[a[k] for k in ACL_FIELDS]
                + ([] if read_only else [_post_button("/acls/delete", {k: a[k] for k in
                                                                        ACL_FIELDS},
                                                      "Delete ACL", csrf)])
                for a in acls["acls"]]
        out = table(("Resource type", "Resource", "Pattern", "Principal", "Host", "Operation",
                     "Permission", *([] if read_only else [""])), rows, "acls")
        if not read_only:
            pick = {k: _select(k, v) for k, v in ACL_CHOICES.items()}
            out += ('<form method="post" action="/acls" id="create-acl">'
                    f'{hidden({"csrf": csrf})}{pick["resource_type"]} '
                    '<input name="resource_name" placeholder="resource name"> '
                    f'{pick["pattern_type"]} '
                    '<input name="principal" placeholder="User:alice" required> '
                    f'<input name="host" value="*" size="8"> {pick["operation"]} '
                    f'{pick["permission"]} <button type="submit">Add ACL</button></form>')
    user_rows = [[u["user"], ", ".join(f"{c['mechanism']} ({c['iterations']} iterations)"
                                       for c in u["credentials"])]
                 + ([] if read_only else [Raw(" ".join(
                     _post_button("/users/delete", {"user": u["user"],
                                                    "mechanism": c["mechanism"]},
                                  f"Delete {c['mechanism']}", csrf)
                     for c in u["credentials"]))])
                 for u in users]
    out += "<h2>SCRAM users</h2>" + table(
        ("User", "Credentials", *([] if read_only else [""])), user_rows, "users")
    if not read_only:
        out += ('<form method="post" action="/users" id="set-scram">'
                f'{hidden({"csrf": csrf})}<input name="user" placeholder="user" required> '
                '<input name="password" type="password" placeholder="password" required '
                'autocomplete="new-password"> '
                f'{_select("mechanism", SCRAM)} '
                '<input name="iterations" type="number" value="4096" min="4096"> '
                '<button type="submit">Set credentials</button></form>')
    return out


def login(error: str | None, mechanism: str) -> str:
    options = "".join(f"<option{' selected' if m == mechanism else ''}>{m}</option>"
                      for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
    err = f'<p class="error" id="error">{esc(error)}</p>' if error else ""
    return (f"{err}<p>The cluster is secured: log in with your SASL credentials.</p>"
            '<form method="post" action="/login" id="login">'
            '<label>User <input name="username" required autocomplete="username"></label>'
            '<label>Password <input name="password" type="password" required '
            'autocomplete="current-password"></label>'
            f'<label>Mechanism <select name="mechanism">{options}</select></label>'
            '<button type="submit">Log in</button></form>')
