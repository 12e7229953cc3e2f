#!/usr/bin/env python3
"""Rewrite the repository's references to its five packages to the `samsa` import name.

    python tools/rename_to_samsa.py [--check] [--no-ruff] [ROOT]

The five folders (broker, config, coordinator, protocol, storage) stay at the top of the
repository; they are installed, and imported, as samsa.broker, samsa.config, ... (see
samsa/__init__.py and pyproject.toml). This script rewrites every git-tracked text file:

* Python import statements (in .py files and in the code blocks of .md files):
      from broker.app import X   ->  from samsa.broker.app import X
      from config import X       ->  from samsa.config import X
      import broker              ->  from samsa import broker
      import storage.errors      ->  import samsa.storage.errors
                                     from samsa import storage      (keeps `storage.errors.X`)
      import storage.x as y      ->  import samsa.storage.x as y
* every other dotted module path, wherever it stands (strings, `python -m ...`, entry points,
  logger names, mock targets, Makefile lines, docs), when the dotted name is a module or package
  of the repository (at least two parts, e.g. broker.cli, coordinator.group.coordinator,
  broker.app.run): broker.cli -> samsa.broker.cli. Dotted names that are not modules of the
  repository (broker.id, broker.rack, broker.log, config.storage.topic) are left alone.
* in TOML files, per-package globs: "protocol.*" -> "samsa.protocol.*".

In Python files, strings on one line are always rewritten (argv, logger names, mock targets);
comments and docstrings only where the line stays within 100 characters; dotted names in code
only for packages the file binds with `import pkg.sub` (elsewhere `broker.server` may be an
attribute of a variable named broker).

Folders with a pyproject.toml of their own (sample user projects) are left alone.

It is deterministic and idempotent: names already under samsa. are never touched, so a second
run changes nothing. Finally, unless --no-ruff, it lets ruff re-sort the imports of the Python
files it changed (ruff check --fix --select I), as the new import forms sort differently.

--check: change nothing, list the files that would change, exit 1 if any.
"""

from __future__ import annotations

import argparse
import io
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

PACKAGES = ("broker", "config", "coordinator", "protocol", "storage")
NAME = "samsa"
LINE_LENGTH = 100  # pyproject.toml [tool.ruff] line-length
_PKG = "|".join(PACKAGES)

TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".txt", ".sh", ".json",
                 ".rst"}
TEXT_NAMES = {"Makefile", "Dockerfile", "run"}
# This script names the old paths on purpose; the samsa package is written with the new ones.
SKIP = {"tools/rename_to_samsa.py"}
SKIP_DIRS = ("samsa/",)

# `from pkg import ...` / `from pkg.sub import ...` at the start of a line.
FROM_RE = re.compile(rf"^(\s*)from ({_PKG})(\.[\w.]+)?(\s+import\b)", re.M)
# `import pkg[.sub] [as alias]` alone on its line (possibly indented).
IMPORT_RE = re.compile(rf"^(\s*)import ({_PKG})((?:\.\w+)*)(\s+as\s+\w+)?[ \t]*(#.*)?$", re.M)
# Any other dotted name starting with one of the packages and not already under samsa.
DOTTED_RE = re.compile(rf"(?<![\w.\-/$])({_PKG})((?:\.\w+)+)")
TOML_GLOB_RE = re.compile(rf"(?<![\w.\-/])({_PKG})\.\*")


class Modules:
    """Which dotted names are modules/packages of the repository at `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[str, bool] = {}

    def is_module(self, dotted: str) -> bool:
        if dotted not in self._cache:
            rel = Path(*dotted.split("."))
            p = self.root / rel
            self._cache[dotted] = (p.with_suffix(".py").is_file()
                                   or (p / "__init__.py").is_file())
        return self._cache[dotted]

    def module_prefix_len(self, parts: list[str]) -> int:
        """Number of leading parts that name a module (0 when not even pkg.sub is one)."""
        n = 0
        for i in range(2, len(parts) + 1):
            if self.is_module(".".join(parts[:i])):
                n = i
            else:
                break
        return n


def _rewrite_imports(text: str) -> str:
    text = FROM_RE.sub(lambda m: f"{m[1]}from {NAME}.{m[2]}{m[3] or ''}{m[4]}", text)

    def imp(m: re.Match[str]) -> str:
        indent, pkg, sub, alias, comment = m[1], m[2], m[3], m[4], m[5]
        tail = f"  {comment}" if comment else ""
        if sub or alias:
            # `import pkg.sub` binds `samsa` now: _rewrite_python_code renames the uses
            return f"{indent}import {NAME}.{pkg}{sub}{alias or ''}{tail}"
        return f"{indent}from {NAME} import {pkg}{tail}"

    return IMPORT_RE.sub(imp, text)


def _bound_packages(text: str) -> set[str]:
    """Packages bound as module namespaces by `import pkg.sub` (no alias) in this file: only
    their dotted uses in code (`storage.errors.X`) are module paths; elsewhere `broker.server`
    may be an attribute of a variable named broker."""
    return {m[2] for m in IMPORT_RE.finditer(text) if m[3] and not m[4]}


def _rewrite_dotted(text: str, modules: Modules, max_len: int | None = None) -> str:
    """Prefix dotted module paths in `text`; with max_len, only where the line stays within
    max_len characters (prose: comments and docstrings)."""

    def dotted(m: re.Match[str]) -> str:
        parts = [m[1], *m[2][1:].split(".")]
        n = modules.module_prefix_len(parts)
        # a module path, possibly followed by at most two attribute names (mock targets,
        # entry points); anything longer is prose or a property name
        if n == 0 or len(parts) - n > 2:
            return m[0]
        return f"{NAME}.{m[0]}"

    if max_len is None:
        return DOTTED_RE.sub(dotted, text)
    out = []
    for line in text.splitlines(keepends=True):
        new = DOTTED_RE.sub(dotted, line)
        out.append(new if len(new.rstrip("\r\n")) <= max_len else line)
    return "".join(out)


def _rewrite_python_code(text: str, modules: Modules, bound: set[str]) -> str:
    """Module paths in Python source, token by token: in one-line strings always (argv,
    logger names, mock targets, entry points); in comments and docstrings where the line
    still fits LINE_LENGTH; in code, dotted uses of packages bound by `import pkg.sub`."""
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []  # (row, col_start, col_end, new) on one line
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return _rewrite_dotted(text, modules, LINE_LENGTH)
    prev_sig: tokenize.TokenInfo | None = None
    for i, tok in enumerate(tokens):
        (srow, scol), (erow, ecol) = tok.start, tok.end
        if tok.type == tokenize.STRING and srow == erow:
            new = _rewrite_dotted(tok.string, modules)
            if new != tok.string:
                edits.append((srow, scol, ecol, new))
        elif tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and srow != erow):
            pass  # prose: handled line by line below
        elif (tok.type == tokenize.NAME and tok.string in bound
              and not (prev_sig is not None and prev_sig.string == ".")):
            parts = [tok.string]
            j = i + 1
            while (j + 1 < len(tokens) and tokens[j].string == "."
                   and tokens[j + 1].type == tokenize.NAME):
                parts.append(tokens[j + 1].string)
                j += 2
            if len(parts) >= 2 and modules.module_prefix_len(parts) >= 2:
                edits.append((srow, scol, scol, f"{NAME}."))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT,
                            tokenize.DEDENT):
            prev_sig = tok
    for row, c0, c1, new in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:c0] + new + line[c1:]
    # prose: comments and multi-line strings, where the line still fits
    prose_rows = {r for tok in tokens if tok.type == tokenize.COMMENT for r in [tok.start[0]]}
    for tok in tokens:
        if tok.type == tokenize.STRING and tok.start[0] != tok.end[0]:
            prose_rows.update(range(tok.start[0], tok.end[0] + 1))
    for row in sorted(prose_rows):
        lines[row - 1] = _rewrite_dotted(lines[row - 1], modules, LINE_LENGTH)
    return "".join(lines)


def _md_code_blocks(text: str, fn) -> str:  # type: ignore[no-untyped-def]
    """Apply fn to the fenced code blocks of a Markdown text."""
    out, block, inside = [], [], False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            if inside:
                out.append(fn("".join(block)))
                block = []
            inside = not inside
            out.append(line)
        elif inside:
            block.append(line)
        else:
            out.append(line)
    if block:
        out.append(fn("".join(block)))
    return "".join(out)


def rewrite(path: Path, text: str, modules: Modules) -> str:
    if path.suffix == ".py":
        bound = _bound_packages(text)
        text = _rewrite_imports(text)
        return _rewrite_python_code(text, modules, bound)
    if path.suffix == ".md":
        text = _md_code_blocks(text, _rewrite_imports)
    if path.suffix == ".toml":
        text = TOML_GLOB_RE.sub(lambda m: f"{NAME}.{m[1]}.*", text)
    return _rewrite_dotted(text, modules)


def tracked_files(root: Path) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True,
                         capture_output=True).stdout.decode()
    tracked = sorted(filter(None, out.split("\0")))
    # a folder with a pyproject.toml of its own (examples/orders-app) is another project: its
    # `config` is its own module, not Samsa's
    projects = tuple(rel.removesuffix("pyproject.toml") for rel in tracked
                     if rel.endswith("/pyproject.toml"))
    files = []
    for rel in tracked:
        p = root / rel
        if (rel in SKIP or rel.startswith(SKIP_DIRS) or rel.startswith(projects)
                or p.is_symlink() or not p.is_file()):
            continue
        if p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES:
            files.append(p)
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--check", action="store_true", help="list what would change; exit 1 if any")
    ap.add_argument("--no-ruff", action="store_true", help="do not re-sort imports with ruff")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    modules = Modules(root)
    changed: list[Path] = []
    for path in tracked_files(root):
        try:
            old = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite(path, old, modules)
        if new != old:
            changed.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for p in changed:
        print(p.relative_to(root))
    if args.check:
        return 1 if changed else 0
    py = [str(p) for p in changed if p.suffix == ".py"]
    if py and not args.no_ruff:
        ruff = shutil.which("ruff") or str(root / ".venv" / "bin" / "ruff")
        if Path(ruff).exists():
            subprocess.run([ruff, "check", "--no-cache", "--fix", "--select", "I", "-q", *py],
                           cwd=root, check=False)
            # what no rule here can do: wrap a line the longer names pushed past the limit
            left = subprocess.run([ruff, "check", "--no-cache", "--select", "E501",
                                   "--output-format", "concise", "-q", *py],
                                  cwd=root, capture_output=True, text=True).stdout
            if left.strip():
                print(f"wrap these lines by hand:\n{left}", file=sys.stderr)
        else:
            print("ruff not found: imports not re-sorted (run ruff check --fix --select I)",
                  file=sys.stderr)
    print(f"{len(changed)} files rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
