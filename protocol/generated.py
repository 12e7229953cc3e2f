"""Functions generated from source lines, for the per-request walks of a schema (the request
guard, the response encoder): one function with every field's step in place costs a fraction
of a closure per field called in turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def bind(env: dict[str, Any], value: Any) -> str:
    """A fresh name for `value` in the generated code's namespace `env`."""
    name = f"_{len(env)}"
    env[name] = value
    return name


def make_function(lines: list[str], env: dict[str, Any], origin: str) -> Callable[..., Any]:
    """The one function the source `lines` define, compiled with `env` as its globals;
    `origin` names it in tracebacks."""
    local: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<{origin}>", "exec"), env, local)
    (function,) = local.values()
    made: Callable[..., Any] = function
    return made
