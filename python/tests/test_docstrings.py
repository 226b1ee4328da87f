"""Every public name of distlock and distlock.aio carries its contract in a
docstring (help(), IDEs and the docs read them): the names in each module's
__all__, every public method and property of their classes, and the
context-manager and decorator methods. A constant (an int, a str) cannot
carry a docstring: its module's docstring must name it."""
import inspect
from typing import Iterator, List, Tuple

import distlock
import distlock.aio

MODULES = [distlock, distlock.aio]
# Dunder methods that are part of a class's public contract (how it is used),
# not Python plumbing (__repr__, __del__, __reduce_ex__...). __init__ is not
# among them: the class docstring documents the constructor (help() shows it).
CONTRACT_DUNDERS = {"__enter__", "__exit__", "__aenter__", "__aexit__", "__call__"}


def _doc(obj: object) -> str:
    # inspect.getdoc would inherit a base class's docstring: a subclass or an
    # override that says nothing of its own is undocumented.
    return (getattr(obj, "__doc__", None) or "").strip()


def _members(cls: type) -> Iterator[Tuple[str, object]]:
    """The methods and properties cls itself defines (inherited ones are
    checked on the class that defines them, if it is distlock's)."""
    for name, value in vars(cls).items():
        if name.startswith("_") and name not in CONTRACT_DUNDERS:
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        # a method written in C (Client.lock) is a method descriptor
        if isinstance(value, property) or inspect.isfunction(value) or \
                inspect.ismethoddescriptor(value):
            yield name, value


def _undocumented() -> List[str]:
    missing = []
    for mod in MODULES:
        if not _doc(mod):
            missing.append(mod.__name__)
        for name in mod.__all__:
            obj = getattr(mod, name)
            where = "%s.%s" % (mod.__name__, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                if not _doc(obj):
                    missing.append(where)
                if inspect.isclass(obj):
                    for mname, member in _members(obj):
                        if not _doc(member):
                            missing.append("%s.%s" % (where, mname))
            elif name not in (mod.__doc__ or ""):
                missing.append("%s (a constant: not named in the module docstring)" % where)
    return missing


def test_every_public_name_has_a_docstring() -> None:
    missing = _undocumented()
    assert not missing, "no docstring:\n  " + "\n  ".join(missing)


def test_the_walk_sees_methods_and_properties() -> None:
    # The check is only as good as its walk: it must reach a method, a
    # property and a context-manager method of both modules' classes.
    names = {name for name, _ in _members(distlock.Client)}
    assert {"lock", "close", "quorum", "__enter__"} <= names
    names = {name for name, _ in _members(distlock.aio.Lock)}
    assert {"acquire", "held", "__aenter__", "__call__"} <= names
