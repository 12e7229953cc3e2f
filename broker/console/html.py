"""Server-rendered HTML of the console: one layout, tables and forms, every value escaped."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

NAV = (("/", "Brokers"), ("/topics", "Topics"), ("/groups", "Groups"),
       ("/transactions", "Transactions"), ("/security", "ACLs & users"))

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222}
header{background:#2d3e50;color:#fff;padding:.5em 1em;display:flex;gap:1.2em;align-items:center}
header a{color:#fff;text-decoration:none}
header .right{margin-left:auto;font-size:.9em;display:flex;gap:1.2em}
main{padding:1em}table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eef}td.num{text-align:right}.bad{color:#b00;font-weight:bold}
.ok{color:#070}.banner{background:#fe9;padding:.4em 1em}.error{background:#fdd;padding:.5em}
pre{margin:0;white-space:pre-wrap;word-break:break-all;max-width:60em}
form.inline{display:inline}label{margin-right:1em}
"""


def esc(value: Any) -> str:
    return "" if value is None else escape(str(value))


# The "refresh" box of the pages that only show: once ticked (kept in the browser's storage for
# every page), the page reloads every 5 seconds.
REFRESH = """<label><input type="checkbox" id="auto-refresh"> refresh every 5 s
</label><script>
(function(){
  const box=document.getElementById('auto-refresh');
  box.checked=localStorage.getItem('samsa-refresh')==='1';
  let timer=null;
  function arm(){
    clearTimeout(timer);
    if(box.checked) timer=setTimeout(()=>location.reload(), 5000);
  }
  box.addEventListener('change', ()=>{
    localStorage.setItem('samsa-refresh', box.checked ? '1' : '0'); arm();
  });
  arm();
})();
</script>"""


def page(title: str, body: str, *, read_only: bool = False, user: str | None = None,
         refresh: bool = False) -> str:
    nav = "".join(f'<a href="{href}">{esc(name)}</a>' for href, name in NAV)
    who = (f'<span id="user">{esc(user)} · <a href="/logout">log out</a></span>'
           if user else "")
    banner = ('<div class="banner" id="read-only">Read-only console: every change is refused.'
              "</div>" if read_only else "")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)} · Samsa"
            f"</title><style>{STYLE}</style></head><body><header><b>Samsa console</b>{nav}"
            f"<span class='right'>{REFRESH if refresh else ''}{who}</span></header>{banner}"
            f"<main><h1>{esc(title)}</h1>{body}</main></body></html>")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], table_id: str = "") -> str:
    """Cells are escaped unless given as Raw (links, forms)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class Raw(str):
    """HTML already safe to insert."""


def _cell(value: Any) -> str:
    if isinstance(value, Raw):
        return f"<td>{value}</td>"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f'<td class="num">{value}</td>'
    return f"<td>{esc(value)}</td>"


def link(href: str, text: Any) -> Raw:
    return Raw(f'<a href="{esc(href)}">{esc(text)}</a>')


def error_box(message: str) -> str:
    return f'<div class="error" id="error">{esc(message)}</div>'


def size(n: int | None) -> str:
    if n is None or n < 0:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def when(ms: int | None) -> str:
    if ms is None or ms < 0:
        return ""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime(
        "%Y-%m-%d %H:%M:%S UTC")


def hidden(fields: dict[str, Any]) -> str:
    return "".join(f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">'
                   for k, v in fields.items())


def decode(data: bytes | None, fmt: str) -> str:
    """A key or value as text (UTF-8, undecodable bytes replaced), hex or indented JSON (text
    when it does not parse)."""
    if data is None:
        return "null"
    if fmt == "hex":
        return data.hex(" ")
    text = data.decode("utf-8", "replace")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text
