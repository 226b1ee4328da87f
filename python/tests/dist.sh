#!/usr/bin/env bash
# The Python distribution, as a user gets it (suite `pydist` of scripts/test.sh).
# Offline, in a temp dir:
#  1. python3 -m build --no-isolation (Debian's python3-build): the sdist
#     libdistlock-X.Y.Z.tar.gz and, built from it, the wheel
#     libdistlock-X.Y.Z-cpXY-cpXY-PLATFORM.whl (X.Y.Z: core/include/distlock.h).
#  2. their file lists (every module, stub and py.typed of python/distlock/,
#     the C core and the SWIG interface in the sdist, the compiled module in
#     the wheel, the LICENSE in both) and metadata (name, version, MIT and its
#     file, Requires-Python, classifiers, project URLs, the README as markdown).
#  3. each installed with pip into fresh venvs: Debian's /usr/bin/python3
#     (--system-site-packages: Debian's pytest and redis-py), and the python3
#     on PATH when it is another interpreter (pyenv; Debian's pure-Python
#     pytest and redis-py reach it through a .pth line when it is the same
#     minor version, else it runs the example only). The full pytest suite
#     runs against the wheel in the Debian venv; the README example and a
#     smoke subset of pytest (SMOKE below) against every other install; a
#     pytest plugin checks that `distlock` is imported from the venv under
#     test, never from the source tree.
#  4. a stand-in for the unrelated `distlock` distribution installed before
#     ours: `import distlock` must raise the ImportError that names it; and
#     installed after ours: its module wins (what python/README.md says).
# Exits non-zero on any failure.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)   # python/
root=$(cd "$here/.." && pwd)
redis_sh=$root/tests/harness/redis.sh
deb=/usr/bin/python3
SMOKE=(test_basic.py test_errors.py test_redlock.py)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/distlock-pydist.XXXXXX")
cleanup() {
  bash "$redis_sh" stop "$tmp/redis" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_NO_INDEX=1
step() { echo "== pydist: $*"; }
fail() { echo "pydist: FAIL $*" >&2; exit 1; }

v=$(sed -n 's/^#define DISTLOCK_VERSION_STRING "\(.*\)"$/\1/p' "$root/core/include/distlock.h")
[ -n "$v" ] || fail "no DISTLOCK_VERSION_STRING in core/include/distlock.h"

# ---------------------------------------------------------------- 1. build
step "python3 -m build --no-isolation ($("$deb" -V 2>&1))"
"$deb" -m build --no-isolation -o "$tmp/dist" "$here" > "$tmp/build.log" 2>&1 \
  || { tail -n 40 "$tmp/build.log" >&2; fail "python3 -m build"; }
sdist=$tmp/dist/libdistlock-$v.tar.gz
[ -f "$sdist" ] || fail "no $(basename "$sdist"): $(ls "$tmp/dist")"
wheels=("$tmp"/dist/libdistlock-"$v"-*.whl)
[ ${#wheels[@]} -eq 1 ] && [ -f "${wheels[0]}" ] || fail "want one wheel, got: $(ls "$tmp/dist")"
wheel=${wheels[0]}
for f in "$sdist" "$wheel"; do echo "$(basename "$f"): $(stat -c %s "$f") bytes"; done

# ------------------------------------------------------- 2. files, metadata
step "file lists and metadata"
"$deb" - "$sdist" "$wheel" "$here" "$root" "$v" <<'EOF'
import email.parser, glob, os, sys, tarfile, zipfile
sdist, wheel, here, root, version = sys.argv[1:]
bad = []
# What the package is made of in the source tree: it all must ship.
pkg = sorted(os.path.relpath(p, here) for p in glob.glob(os.path.join(here, "distlock", "**", "*"), recursive=True)
             if os.path.isfile(p) and (p.endswith((".py", ".pyi")) or os.path.basename(p) == "py.typed")
             and "__pycache__" not in p and os.path.basename(p) != "_core.py")
core = sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "core", "src", "*.[ch]")))
base = "libdistlock-%s/" % version
with tarfile.open(sdist) as t:
    members = {m.name[len(base):]: m for m in t.getmembers() if m.name.startswith(base)}
    for need in pkg + core + ["core/include/distlock.h", "bindings/distlock.i", "setup.py", "pyproject.toml",
                              "README.md", "LICENSE", "PKG-INFO", "MANIFEST.in"]:
        if need not in members:
            bad.append("sdist lacks " + need)
    if "distlock/_core.py" in members:
        bad.append("sdist ships the generated distlock/_core.py")
    lic = members.get("LICENSE")
    if lic is not None and (not lic.isfile() or b"MIT License" not in t.extractfile(lic).read()):
        bad.append("sdist's LICENSE is not the MIT text as a file")
    sdist_meta = t.extractfile(members["PKG-INFO"]).read().decode() if "PKG-INFO" in members else ""
with zipfile.ZipFile(wheel) as z:
    names = set(z.namelist())
    di = "libdistlock-%s.dist-info/" % version
    for need in pkg + ["distlock/_core.py", di + "METADATA", di + "RECORD", di + "WHEEL", di + "LICENSE"]:
        if need not in names:
            bad.append("wheel lacks " + need)
    if not any(n.startswith("distlock/__core.") and n.endswith(".so") for n in names):
        bad.append("wheel lacks the compiled distlock/__core*.so")
    if di + "LICENSE" in names and b"MIT License" not in z.read(di + "LICENSE"):
        bad.append("wheel's LICENSE is not the MIT text")
    wheel_meta = z.read(di + "METADATA").decode() if di + "METADATA" in names else ""
for what, text in (("sdist PKG-INFO", sdist_meta), ("wheel METADATA", wheel_meta)):
    m = email.parser.Parser().parsestr(text)
    want = {"Name": "libdistlock", "Version": version, "License": "MIT",
            "Requires-Python": ">=3.8", "Description-Content-Type": "text/markdown"}
    for k, val in want.items():
        if m.get(k) != val:
            bad.append("%s: %s is %r, want %r" % (what, k, m.get(k), val))
    if "LICENSE" not in (m.get_all("License-File") or []):
        bad.append("%s: no License-File: LICENSE" % what)
    cls = m.get_all("Classifier") or []
    for c in ("License :: OSI Approved :: MIT License", "Programming Language :: Python :: 3",
              "Typing :: Typed"):
        if c not in cls:
            bad.append("%s: no classifier %r" % (what, c))
    if not m.get_all("Project-URL"):
        bad.append("%s: no Project-URL" % what)
    if not (m.get("Summary") or "").strip():
        bad.append("%s: empty Summary" % what)
    if not m.get_payload().lstrip().startswith("# distlock for Python") or "libdistlock" not in m.get_payload():
        bad.append("%s: the long description is not python/README.md" % what)
for b in bad:
    print("pydist: FAIL " + b, file=sys.stderr)
if bad:
    sys.exit(1)
print("sdist: %d files; wheel: %d files; package files checked: %s" % (len(members), len(names), " ".join(pkg)))
EOF

# --------------------------------------------------- 3. install and test
bash "$redis_sh" start "$tmp/redis" 1 >/dev/null
export DISTLOCK_SERVERS
DISTLOCK_SERVERS=$(bash "$redis_sh" uris "$tmp/redis")
# The first ```python block of the README is the example.
awk '/^```python$/ {on=1; next} on && /^```$/ {exit} on {print}' "$here/README.md" > "$tmp/example.py"
[ -s "$tmp/example.py" ] || fail "no example in python/README.md"
# A pytest plugin: the distlock under test is the venv's.
mkdir -p "$tmp/plugin"
cat > "$tmp/plugin/distlock_origin.py" <<'EOF'
import os

import pytest

import distlock

WHERE = os.path.realpath(os.path.dirname(distlock.__file__))


def pytest_report_header(config):
    return "distlock under test: %s (%s)" % (WHERE, distlock.__version__)


def pytest_sessionstart(session):
    want = os.path.realpath(os.environ["DISTLOCK_EXPECT_PREFIX"]) + os.sep
    if not WHERE.startswith(want):
        raise pytest.UsageError("distlock imported from %s, not from the venv %s" % (WHERE, want))
EOF

# venv NAME PYTHON [--system-site-packages]: a fresh venv; prints its dir.
venv() {
  local dir=$tmp/$1 py=$2
  shift 2
  "$py" -m venv "$@" "$dir" >&2
  echo "$dir"
}
# Make Debian's pure-Python pytest and redis-py visible to a venv of another
# interpreter of the same minor version (after the venv's own site-packages).
borrow_pytest() {
  local dir=$1 site
  site=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo /usr/lib/python3/dist-packages > "$site/zz-debian-dist-packages.pth"
}
# check NAME VENV MODE: the install imports from VENV, runs the example, and
# pytest (full / smoke / none).
check() {
  local name=$1 dir=$2 mode=$3 where out
  where=$(cd "$tmp" && "$dir/bin/python" -c 'import os, distlock; print(os.path.realpath(distlock.__file__))')
  case "$where" in "$(realpath "$dir")"/*) ;; *) fail "$name: distlock imported from $where" ;; esac
  out=$(cd "$tmp" && "$dir/bin/python" example.py)
  grep -q "^a second acquire: False$" <<<"$out" && grep -q "^report runs under the lock$" <<<"$out" \
    || { echo "$out" >&2; fail "$name: unexpected example output"; }
  echo "$name: imports $where; example ok ($("$dir/bin/python" -c 'import sys; print(sys.version.split()[0], sys.executable)'))"
  local tests=()
  case "$mode" in
    full) tests=(.) ;;
    smoke) tests=("${SMOKE[@]}") ;;
    none) echo "$name: no pytest for this interpreter: the example only"; return 0 ;;
  esac
  echo "$name: pytest ${tests[*]}"
  (cd "$here/tests" && PYTHONPATH=$tmp/plugin DISTLOCK_EXPECT_PREFIX=$dir \
     "$dir/bin/python" -m pytest -p no:cacheprovider -p distlock_origin -q -rfE "${tests[@]}")
}
pip_install() { "$1/bin/pip" install -q --no-deps --no-build-isolation "$2"; }

step "the wheel into a fresh Debian python3 venv: full pytest"
d=$(venv deb-wheel "$deb" --system-site-packages); pip_install "$d" "$wheel"; check deb-wheel "$d" full

step "the sdist into a fresh Debian python3 venv: pip builds it"
d=$(venv deb-sdist "$deb" --system-site-packages); pip_install "$d" "$sdist"; check deb-sdist "$d" smoke

py=$(command -v python3)
if [ "$(realpath "$py")" != "$(realpath "$deb")" ] && \
   [ "$("$py" -c 'import sys; print(sys.prefix)')" != "$("$deb" -c 'import sys; print(sys.prefix)')" ]; then
  same_minor=0
  [ "$("$py" -c 'import sys; print(sys.version_info[:2])')" = "$("$deb" -c 'import sys; print(sys.version_info[:2])')" ] && same_minor=1
  mode=none; [ $same_minor = 1 ] && mode=smoke
  step "the sdist into a fresh venv of $py ($("$py" -V 2>&1))"
  d=$(venv path-sdist "$py"); [ $same_minor = 1 ] && borrow_pytest "$d"
  pip_install "$d" "$sdist"; check path-sdist "$d" $mode
  if [ $same_minor = 1 ]; then
    step "the wheel into a fresh venv of $py (same tag as Debian's python3)"
    d=$(venv path-wheel "$py"); borrow_pytest "$d"; pip_install "$d" "$wheel"; check path-wheel "$d" smoke
  fi
else
  echo "pydist: the python3 on PATH is Debian's: no second interpreter to install into"
fi

# ------------------------------------------- 4. the unrelated `distlock`
step "a stand-in for the unrelated 'distlock' distribution, installed with ours"
mkdir -p "$tmp/other/distlock"
cat > "$tmp/other/setup.py" <<'EOF'
from setuptools import setup
setup(name="distlock", version="0.0.1.dev1", packages=["distlock"],
      description="Distributed locks with Redis (a test stand-in for the unrelated project)")
EOF
echo 'from .distlock import DistLock' > "$tmp/other/distlock/__init__.py"
echo 'class DistLock: pass' > "$tmp/other/distlock/distlock.py"
d=$(venv both "$deb" --system-site-packages)
pip_install "$d" "$tmp/other"
pip_install "$d" "$wheel"   # ours last: our __init__ runs and must see theirs
set +e
out=$(cd "$tmp" && "$d/bin/python" -c 'import distlock' 2>&1); st=$?
set -e
[ $st -ne 0 ] && grep -q "ImportError: distlock: another distribution named 'distlock' (version 0.0.1.dev1" <<<"$out" \
  && grep -q "pip uninstall distlock libdistlock" <<<"$out" \
  || { echo "$out" >&2; fail "ours installed after the unrelated distlock: no clear ImportError"; }
echo "ours last: $(tail -n 1 <<<"$out" | cut -c1-150)..."
"$d/bin/pip" install -q --no-deps --no-build-isolation --force-reinstall "$tmp/other"   # theirs last
out=$(cd "$tmp" && "$d/bin/python" -c 'import distlock; print(hasattr(distlock, "DistLock"), hasattr(distlock, "Client"))')
[ "$out" = "True False" ] || fail "theirs installed last: import distlock gave '$out', want their module"
echo "theirs last: import distlock gives their module (DistLock, no Client), as python/README.md says"
echo "pydist: all checks passed"
