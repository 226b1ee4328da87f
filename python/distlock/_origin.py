"""Is the ``distlock`` package being imported ours?

This package is distributed as ``libdistlock`` (pip install libdistlock) but
imported as ``distlock``. An unrelated project owns the distribution name
``distlock`` on the Python package index and installs a top-level package of
the same name; with both installed, each one's files overwrite the other's in
one ``distlock/`` directory, and uninstalling either breaks the other. When
this file runs, our ``__init__`` won the last write; the other distribution's
metadata is still there, so it is cheap to see and say (one look-up of a
dist-info directory) instead of running on a half-overwritten package.
"""
import sys

OUR_DIST = "libdistlock"
OTHER_DIST = "distlock"


def check() -> None:
    """Raise ImportError if a distribution named ``distlock`` is installed."""
    if sys.version_info < (3, 8):  # no importlib.metadata: nothing to look at
        return
    from importlib import metadata

    try:
        other = metadata.distribution(OTHER_DIST)
    except metadata.PackageNotFoundError:
        return
    if any(str(f).replace("\\", "/") == "distlock/_client.py" for f in other.files or []):
        return  # this package itself, built before the rename (its files are ours too)
    try:
        summary = other.metadata["Summary"] or "no summary"
    except KeyError:  # newer importlib.metadata: a missing field raises
        summary = "no summary"
    raise ImportError(
        "distlock: another distribution named %r (version %s, %r) is installed in this "
        "environment. It is not this package (%s) but uses the same import name, "
        "distlock, so the two overwrite each other's files. Uninstall both "
        "(pip uninstall %s %s), then install the one you want (pip install %s)."
        % (OTHER_DIST, other.version, summary, OUR_DIST, OTHER_DIST, OUR_DIST, OUR_DIST))
