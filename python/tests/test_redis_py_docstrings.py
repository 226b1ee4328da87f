"""distlock.redis_py's public names carry their contract in docstrings, by
test_docstrings.py's rule (every name in __all__, every public method and
property, the context-manager methods; constants named in the module's)."""
import inspect

import distlock.redis_py
from test_docstrings import _doc, _members


def test_every_public_name_of_redis_py_has_a_docstring() -> None:
    mod = distlock.redis_py
    missing = [] if _doc(mod) else [mod.__name__]
    for name in mod.__all__:
        obj = getattr(mod, name)
        if inspect.isclass(obj):
            missing += [name] if not _doc(obj) else []
            missing += ["%s.%s" % (name, m) for m, member in _members(obj) if not _doc(member)]
        elif name not in (mod.__doc__ or ""):
            missing.append(name + " (a constant not named in the module docstring)")
    assert not missing, "no docstring:\n  " + "\n  ".join(missing)
