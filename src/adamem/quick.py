"""Quick constructors of frozen, slotted dataclasses: the same objects as the class makes, ~5× faster.

A frozen dataclass's ``__init__`` sets every field through ``object.__setattr__`` (~0.1 µs a
field), which is most of what building an event model from a decoded record or a row in a fold
costs. ``quick_constructor(cls)`` is a class with the same slots, in the same order, whose
``__init__`` stores the fields directly (defaults and default factories as the dataclass's) and
then makes the object a ``cls``: the same slot layout is what lets ``__class__`` be assigned, so
the object is a ``cls`` in every way (frozen, equal, hashed, pickled alike). A class with a
``__post_init__`` is refused: it would not run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, cast

__all__ = ["quick_constructor"]

T = TypeVar("T")


def quick_constructor(cls: type[T]) -> Callable[..., T]:
    """A callable that makes the same ``cls`` as ``cls(...)`` does (by position or keyword), without ``__init__``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass with slots")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__, which a quick constructor would not run")
    every = dataclasses.fields(cast(Any, cls))
    fields = [f for f in every if f.init]
    if len(fields) != len(every):
        raise TypeError(f"{cls.__name__} has fields outside __init__")
    namespace: dict[str, Any] = {"_cls": cls, "_MISSING": dataclasses.MISSING}
    args, body = [], []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
            args.append(f"{f.name}=_default_{f.name}")
            body.append(f"    self.{f.name} = {f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            args.append(f"{f.name}=_MISSING")
            body.append(f"    self.{f.name} = _factory_{f.name}() if {f.name} is _MISSING else {f.name}")
        else:
            args.append(f.name)
            body.append(f"    self.{f.name} = {f.name}")
    source = f"def __init__(self, {', '.join(args)}):\n" + "\n".join(body) + "\n    self.__class__ = _cls\n"
    exec(source, namespace)
    names = tuple(f.name for f in fields)
    if tuple(cls.__dict__["__slots__"]) != names:
        raise TypeError(f"{cls.__name__}'s slots are not its fields in order")
    builder = type(f"_Quick{cls.__name__}", (), {"__slots__": names, "__init__": namespace["__init__"]})
    return cast(Callable[..., T], builder)
