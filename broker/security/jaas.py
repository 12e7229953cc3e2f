"""JAAS login configuration files, as the JVM reads the file named by
`java.security.auth.login.config`:

    Client {
      org.apache.zookeeper.server.auth.DigestLoginModule required
        username="broker"
        password="broker-secret";
    };

Sections (login contexts) hold one or more login modules, each with its control flag
(required, requisite, sufficient, optional) and `name=value` options, values quoted or bare.
Comments are `// ...` and `/* ... */`. `${property}` expansion is not done.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from samsa.config.schema import ConfigError

LOGIN_CONFIG = "java.security.auth.login.config"
FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | "(?P<dq>(?:[^"\\]|\\.)*)"
  | '(?P<sq>(?:[^'\\]|\\.)*)'
  | (?P<punct>[{};=])
  | (?P<word>[^\s{};="']+)
""", re.X | re.S)


@dataclass(frozen=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


class JaasError(ConfigError):
    """A JAAS file that cannot be read or is malformed; the message names the file, the line
    and java.security.auth.login.config."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        where = f"{source}, line {line}" if line is not None else source
        super().__init__(LOGIN_CONFIG, f"JAAS file ({LOGIN_CONFIG}) {where}: {message}")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text, flags=re.S)


def _tokens(text: str, source: str) -> list[tuple[str, str, int]]:
    """(kind, text, line) for each token: kind 'word', 'string' or the punctuation itself."""
    out: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        line = text.count("\n", 0, pos) + 1
        if m is None:
            raise JaasError(source, line, f"cannot read {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.group("space") is not None:
            continue
        if m.group("dq") is not None or m.group("sq") is not None:
            quoted = m.group("dq") if m.group("dq") is not None else m.group("sq")
            out.append(("string", _unescape(quoted), line))
        elif m.group("punct") is not None:
            out.append((m.group("punct"), m.group("punct"), line))
        else:
            out.append(("word", m.group("word"), line))
    return out


def parse(text: str, source: str) -> dict[str, list[LoginModule]]:
    """The login contexts of a JAAS file (`source`: its path) by name; JaasError saying where
    it is malformed."""
    tokens = _tokens(text, source)
    contexts: dict[str, list[LoginModule]] = {}
    i = 0

    def take(*kinds: str) -> tuple[str, str, int]:
        nonlocal i
        if i >= len(tokens):
            raise JaasError(source, None, f"ends early, expected {' or '.join(kinds)}")
        tok = tokens[i]
        if tok[0] not in kinds:
            raise JaasError(source, tok[2],
                            f"expected {' or '.join(kinds)}, found {tok[1]!r}")
        i += 1
        return tok

    while i < len(tokens):
        _, name, line = take("word", "string")
        if name in contexts:
            raise JaasError(source, line, f"the login context {name!r} is given twice")
        take("{")
        modules: list[LoginModule] = []
        while tokens[i:i + 1] and tokens[i][0] != "}":
            _, module, _ = take("word")
            _, flag, fline = take("word")
            if flag.lower() not in FLAGS:
                raise JaasError(source, fline, f"{module} has the control flag {flag!r}, "
                                              f"expected one of {', '.join(FLAGS)}")
            options: dict[str, str] = {}
            while tokens[i:i + 1] and tokens[i][0] not in (";", "}"):
                _, key, _ = take("word")
                take("=")
                _, value, _ = take("word", "string")
                options[key] = value
            take(";")
            modules.append(LoginModule(module, flag.lower(), options))
        take("}")
        take(";")
        if not modules:
            raise JaasError(source, line, f"the login context {name!r} has no login module")
        contexts[name] = modules
    return contexts


def read(path: str) -> dict[str, list[LoginModule]]:
    """The login contexts of the JAAS file at `path` (JaasError if unreadable)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise JaasError(path, None, f"cannot be read: {exc}") from None
    return parse(text, path)
