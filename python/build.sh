#!/usr/bin/env bash
# Create a virtual environment at VENV_DIR (Debian's /usr/bin/python3, with
# --system-site-packages so pytest and redis-py stay visible) and install the
# distlock package into it from this checkout, offline.
#
#   python/build.sh VENV_DIR      then: VENV_DIR/bin/python -c 'import distlock'
set -euo pipefail
venv=${1:?usage: python/build.sh VENV_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
# A build of this package from before it was named libdistlock (distribution
# "distlock", owning distlock/_client.py): drop its record, or uninstalling it
# later would delete files libdistlock now owns.
if "$venv/bin/python" -c 'import sys; from importlib import metadata as m
sys.exit(0 if any(str(f) == "distlock/_client.py" for f in m.distribution("distlock").files or []) else 1)' 2>/dev/null; then
  "$venv/bin/pip" uninstall -y -q distlock
fi
"$venv/bin/pip" install --no-build-isolation --no-index --force-reinstall --no-deps -q "$here"
"$venv/bin/python" -c 'import distlock; print("distlock", distlock.__version__, "installed in", "'"$venv"'")'
