#!/usr/bin/env bash
# Test entry for the Python package (bindings/ + python/), from a fresh clone
# after scripts/deps.sh. Everything happens offline in a temp dir:
#  1. Debian python3: new venv (--system-site-packages: pytest, redis-py),
#     pip install --no-build-isolation ./python  (python/build.sh)
#  2. the python3 on PATH (pyenv): the README's install line into a fresh venv
#  3. the README example run by both installs against a throwaway redis-server
#  4. type hints: mypy's stubtest (the .pyi matches the SWIG module) and
#     mypy --strict on the package and on a typed user example
#  5. pytest (its fixtures start and stop their own redis-servers); its
#     summary is the last thing printed. Exits non-zero on any failure.
# --quick (scripts/test.sh quick): steps 1 and 5 only; the install line, the
# example and the type hints wait for the full run.
# The sdist and the wheel (libdistlock-*), installed into fresh venvs of
# Debian's python3 and of the python3 on PATH, are python/tests/dist.sh's
# (suite pydist).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)   # python/
root=$(cd "$here/.." && pwd)
redis_sh=$root/tests/harness/redis.sh
tmp=$(mktemp -d /tmp/distlock-pytests.XXXXXX)
cleanup() {
  bash "$redis_sh" stop "$tmp/redis" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
step() { echo "== python: $*"; }
quick=0
[ "${1:-}" = --quick ] && quick=1

step "install into a Debian python3 venv (python/build.sh)"
bash "$here/build.sh" "$tmp/venv-debian"

if [ $quick = 0 ]; then
py=$(command -v python3)
step "the README's install line: pip install --no-build-isolation ./python into a fresh $py venv"
"$py" -m venv "$tmp/venv-src"
(cd "$root" && "$tmp/venv-src/bin/pip" install -q --no-build-isolation ./python)

step "README example, run by each install"
bash "$redis_sh" start "$tmp/redis" 1 >/dev/null
export DISTLOCK_SERVERS
DISTLOCK_SERVERS=$(bash "$redis_sh" uris "$tmp/redis")
# The first ```python block of the README is the example.
awk '/^```python$/ {on=1; next} on && /^```$/ {exit} on {print}' "$here/README.md" > "$tmp/example.py"
[ -s "$tmp/example.py" ] || { echo "no example found in python/README.md" >&2; exit 1; }
for v in venv-debian venv-src; do
  # from $tmp, so the source tree's distlock/ can't shadow the installed one
  out=$(cd "$tmp" && "$tmp/$v/bin/python" example.py)
  grep -q "^a second acquire: False$" <<<"$out" && grep -q "^report runs under the lock$" <<<"$out" \
    || { echo "$v: unexpected example output:" >&2; echo "$out" >&2; exit 1; }
  echo "$v: example ok ($("$tmp/$v/bin/python" -c 'import sys; print(sys.version.split()[0], sys.executable)'))"
done
bash "$redis_sh" stop "$tmp/redis"

step "type hints: stubtest of _core.pyi against the module, mypy --strict"
bash "$root/scripts/deps.sh" mypy
(cd "$tmp" && "$tmp/venv-debian/bin/python" -m mypy.stubtest distlock._core)
(cd "$tmp" && "$tmp/venv-debian/bin/python" -m mypy --strict --no-incremental -p distlock \
   && "$tmp/venv-debian/bin/python" -m mypy --strict --no-incremental "$here/tests/typing_example.py" \
       "$here/tests/typing_example_aio.py")
fi

step "pytest (Debian python3 venv)"
cd "$here/tests"
"$tmp/venv-debian/bin/python" -m pytest -p no:cacheprovider -q -rfE .
