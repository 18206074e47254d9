"""Records: the part of ``dataclasses`` gdrcheck uses, at a fraction of its start-up cost.

``@dataclass(frozen=True)`` compiles six methods per class when the module is
imported (about 1 ms a class; some 20 ms of every run went there). ``@record``
gives the same class shape (fields from annotations, defaults,
``field(default_factory=...)``, ``replace``, value equality, a readable
``repr``, frozen instances that hash by value) and compiles each of a class's
``__eq__``, ``__hash__`` and ``__repr__`` the first time it is called, and its
``__init__`` once the class has made a few instances (the first ones go
through a generic one): a run pays only for what it uses.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable


__all__ = ["record", "field", "replace", "fields_of", "FrozenInstanceError"]

if TYPE_CHECKING:  # type checkers read @record as a dataclass; at run time the decorator is left as it is
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_kw):
        return lambda f: f


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen record (the same name ``dataclasses`` uses)."""


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A field whose default is made per instance (``field(default_factory=dict)``)."""
    return _Factory(default_factory)


_NO_DEFAULT = object()


def fields_of(cls_or_obj) -> tuple[str, ...]:
    """The field names of a record class or instance, in order."""
    cls = cls_or_obj if isinstance(cls_or_obj, type) else type(cls_or_obj)
    return cls.__record_fields__


def replace(obj, **changes):
    """A copy of ``obj`` with ``changes`` applied (what ``dataclasses.replace`` does)."""
    names = fields_of(obj)
    for k in changes:
        if k not in names:
            raise TypeError(f"{type(obj).__name__} has no field {k!r}")
    return type(obj)(**{n: changes[n] if n in changes else getattr(obj, n) for n in names})


def _frozen_setattr(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self, name):
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _method_source(cls, name: str, glb: dict[str, Any]) -> str:
    names = cls.__record_fields__
    values = "".join(f"self.{n}, " for n in names)
    if name == "__init__":
        params, body = [], []
        for n in names:
            d = cls.__record_defaults__.get(n, _NO_DEFAULT)
            if d is _NO_DEFAULT:
                params.append(n)
            elif isinstance(d, _Factory):
                glb[f"_f_{n}"] = d.make
                params.append(f"{n}=_NO")
                body.append(f"    if {n} is _NO: {n} = _f_{n}()")
            else:
                glb[f"_d_{n}"] = d
                params.append(f"{n}=_d_{n}")
        body.append("    _s = self.__dict__")
        body.extend(f"    _s[{n!r}] = {n}" for n in names)
        return "\n".join([f"def __init__(self, {', '.join(params)}):" if params else "def __init__(self):", *body])
    if name == "__eq__":
        other = "".join(f"other.{n}, " for n in names)
        return (f"def __eq__(self, other):\n    if other.__class__ is self.__class__:\n"
                f"        return ({values}) == ({other})\n    return NotImplemented")
    if name == "__hash__":
        return f"def __hash__(self):\n    return hash(({values}))"
    shown = ", ".join(f"{n}={{self.{n}!r}}" for n in names)
    return f"def __repr__(self):\n    return f\"{{self.__class__.__qualname__}}({shown})\""


def _compile(cls, name: str) -> None:
    """Compile one of the record's methods and put it on the class in place of its stub."""
    glb: dict[str, Any] = {"_NO": _NO_DEFAULT}
    ns: dict[str, Any] = {}
    code = compile(_method_source(cls, name, glb), f"<record {cls.__qualname__}.{name}>", "exec")
    exec(code, glb, ns)  # noqa: S102 - text built above from the class's own field names
    fn = ns[name]
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    type.__setattr__(cls, name, fn)


# instances a class makes through the generic __init__ before its own is compiled: compiling costs 0.1-0.7 ms
# and saves some 2 us an instance, so only a class that makes hundreds in a run (pairs, findings of a large
# fabric) is worth it; a DGX-like node's functions and links stay generic
COMPILE_AFTER = 256


def _generic_init(cls, self, args: tuple, kw: dict[str, Any]) -> None:
    """What the compiled ``__init__`` does, by looking the fields up: cheaper than compiling for a class that
    makes a few instances in a run, slower per instance for one that makes thousands."""
    names = cls.__record_fields__
    if len(args) > len(names):
        raise TypeError(f"{cls.__name__}() takes {len(names)} arguments but {len(args)} were given")
    values = dict(zip(names, args))
    for k, v in kw.items():
        if k not in names:
            raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {k!r}")
        if k in values:
            raise TypeError(f"{cls.__name__}() got multiple values for argument {k!r}")
        values[k] = v
    defaults = cls.__record_defaults__
    d = self.__dict__
    for n in names:
        if n in values:
            d[n] = values[n]
            continue
        dv = defaults.get(n, _NO_DEFAULT)
        if dv is _NO_DEFAULT:
            raise TypeError(f"{cls.__name__}() missing required argument: {n!r}")
        d[n] = dv.make() if isinstance(dv, _Factory) else dv


def _stub(cls, name: str):
    made = [0]

    def first_use(self, *args, **kw):
        if cls.__dict__.get(name) is first_use:
            if name == "__init__" and made[0] < COMPILE_AFTER:
                made[0] += 1
                _generic_init(cls, self, args, kw)
                return None
            _compile(cls, name)
        return getattr(cls, name)(self, *args, **kw)
    first_use.__name__ = name
    return first_use


@dataclass_transform(field_specifiers=(field,))
def record(cls=None, *, frozen: bool = False):
    """Make ``cls`` a record: ``@record`` (mutable, unhashable) or ``@record(frozen=True)``."""
    def wrap(c):
        names, defaults = [], {}
        for base in reversed(c.__mro__[1:]):
            for n in base.__dict__.get("__record_fields__", ()):
                if n not in names:
                    names.append(n)
                if n in base.__record_defaults__:
                    defaults[n] = base.__record_defaults__[n]
        for n in c.__dict__.get("__annotations__", {}):
            if n not in names:
                names.append(n)
            if n in c.__dict__:
                d = c.__dict__[n]
                defaults[n] = d
                if isinstance(d, _Factory):
                    delattr(c, n)
        seen_default = False
        for n in names:
            if n in defaults:
                seen_default = True
            elif seen_default:
                raise TypeError(f"{c.__name__}: field {n!r} without a default follows one with a default")
        c.__record_fields__ = tuple(names)
        c.__record_defaults__ = defaults
        c.__record_frozen__ = frozen
        c.__match_args__ = tuple(names)
        for m in ("__init__", "__eq__", "__repr__") + (("__hash__",) if frozen else ()):
            setattr(c, m, _stub(c, m))
        if frozen:
            c.__setattr__ = _frozen_setattr
            c.__delattr__ = _frozen_delattr
        else:
            c.__hash__ = None
        return c
    return wrap(cls) if cls is not None else wrap
