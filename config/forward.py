"""`Forward[T]("log.high_watermark")`: a read-only attribute that reads another object's.

It stands for the block

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

which `Partition`, `Log`, the offset index and `BrokerConfig` repeat for every value they hand
through. The type is named once, in the brackets, for mypy (`__get__`'s overloads); at run time
the class attribute becomes a `property` whose getter is `operator.attrgetter(path)`, so a read
runs no Python frame of its own (cheaper than the hand-written property it replaces: these are
read on every Produce and Fetch).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Generic, NoReturn, TypeVar, overload

T = TypeVar("T")


class Forward(Generic[T]):
    """A read-only attribute equal to `path` (dotted) read from the instance."""

    def __init__(self, path: str, doc: str | None = None) -> None:
        self.path = path
        self._get = attrgetter(path)
        self.__doc__ = doc or f"`self.{path}`"

    def __set_name__(self, owner: type, name: str) -> None:
        # Replaced by a plain property: property's C __get__ calling attrgetter's C __call__.
        setattr(owner, name, property(self._get, doc=self.__doc__))

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Forward[T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        # Only reached when the descriptor was set on a class after its creation.
        return self if obj is None else self._get(obj)

    def __set__(self, obj: object, value: NoReturn) -> None:
        # Read-only, as the property it becomes: `value: NoReturn` has mypy refuse any write.
        raise AttributeError(f"read-only: it reads self.{self.path}")
