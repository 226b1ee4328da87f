#!/usr/bin/env bash
# Run a part of the test suite against several Redis / Valkey versions, each
# built from its own source tree, and print a matrix (version x part).
#
#   scripts/server-matrix.sh SRC_DIR... -- PART...
#
# SRC_DIR: an unpacked redis or valkey source tree (e.g. `git archive 5.0.14`
#   of github.com/redis/redis). Built with plain `make` (nice -n 10, -j2) when
#   it has no src/redis-server or src/valkey-server yet; no network needed
#   (both vendor their dependencies). TLS is not built, so TLS tests are out.
# PART, one of:
#   NAME            the ctest NAME (a C test binary) of the normal build in
#                   $DISTLOCK_BUILD_DIR (default <repo>/build; configured with
#                   -DDISTLOCK_BUILD_TESTS=ON and the test built if missing)
#   cli[:T1,T2]     cli/tests/run.sh, or only its tests T1, T2 (t_* names)
#   python[:EXPR]   pytest of python/tests (only `-k EXPR`), in a venv the
#                   script makes once with python/build.sh
#
# Each part runs with PATH starting with a directory of redis-server,
# redis-cli and redis-sentinel links to that tree's build (valkey-* for
# Valkey, which names its binaries so), so the harness starts that version.
# Logs: $DISTLOCK_MATRIX_LOGS (default a new /tmp/distlock-matrix.XXXXXX),
# one per version and part. Exits 1 if any cell failed.
#
# Example (the matrix in docs/servers.md, "Server versions"):
#   scripts/server-matrix.sh /work/redis-src/redis-5.0.14 /work/redis-src/valkey-8.0.1 \
#     -- test_single test_cluster_release_wakes cli:t_list_bounded_on_big_keyspace
set -uo pipefail

usage() { echo "usage: $0 SRC_DIR... -- PART..." >&2; exit 2; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUILD=${DISTLOCK_BUILD_DIR:-$REPO/build}

srcs=() parts=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  d=$(cd "$1" 2>/dev/null && pwd) || { echo "server-matrix: no directory $1" >&2; usage; }
  srcs+=("$d")
  shift
done
[ $# -gt 0 ] || usage
shift
parts=("$@")
if [ ${#srcs[@]} -eq 0 ] || [ ${#parts[@]} -eq 0 ]; then usage; fi

LOGS=${DISTLOCK_MATRIX_LOGS:-$(mktemp -d /tmp/distlock-matrix.XXXXXX)}
mkdir -p "$LOGS/bin"
echo "== logs in $LOGS"

# The server binary of a built tree (redis-server or valkey-server), or "".
server_of() {
  local s
  for s in redis-server valkey-server; do
    [ -x "$1/src/$s" ] && { echo "$1/src/$s"; return; }
  done
}

# "redis 5.0.14" / "valkey 8.0.1", from the binary itself.
version_of() {
  local out
  out=$("$1" --version 2>/dev/null) || return 1
  [[ $out =~ ^([A-Za-z]+)\ server\ v=([0-9.]+) ]] || return 1
  echo "${BASH_REMATCH[1],,} ${BASH_REMATCH[2]}"
}

# ---------------------------------------------------------------- servers
labels=() bins=()
for src in "${srcs[@]}"; do
  if [ -z "$(server_of "$src")" ]; then
    echo "== building $src (make -j2, log: $src/server-matrix-build.log)"
    if ! nice -n 10 make -C "$src" -j2 >"$src/server-matrix-build.log" 2>&1; then
      tail -20 "$src/server-matrix-build.log" >&2
      echo "server-matrix: the build of $src failed" >&2
      exit 1
    fi
  fi
  srv=$(server_of "$src")
  [ -n "$srv" ] || { echo "server-matrix: no redis-server or valkey-server in $src/src" >&2; exit 1; }
  label=$(version_of "$srv") || { echo "server-matrix: $srv --version says nothing usable" >&2; exit 1; }
  prefix=${srv##*/}; prefix=${prefix%-server}   # redis or valkey
  bin=$LOGS/bin/${label// /-}
  mkdir -p "$bin"
  for tool in server cli sentinel; do
    [ -x "$src/src/$prefix-$tool" ] || { echo "server-matrix: no $src/src/$prefix-$tool" >&2; exit 1; }
    ln -sfn "$src/src/$prefix-$tool" "$bin/redis-$tool"
  done
  labels+=("$label") bins+=("$bin")
  echo "== $label: $bin -> $src/src"
done

# ---------------------------------------------------------------- parts
ctests=()
need_python=0
for p in "${parts[@]}"; do
  case $p in
    cli|cli:*) ;;
    python|python:*) need_python=1 ;;
    *) ctests+=("$p") ;;
  esac
done
if [ ${#ctests[@]} -gt 0 ]; then
  echo "== building ${ctests[*]} in $BUILD"
  if ! { [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$REPO" -B "$BUILD" -DDISTLOCK_BUILD_TESTS=ON; } \
         >"$LOGS/build-tests.log" 2>&1 ||
     ! nice cmake --build "$BUILD" -j2 --target "${ctests[@]}" >>"$LOGS/build-tests.log" 2>&1; then
    tail -30 "$LOGS/build-tests.log" >&2
    echo "server-matrix: building the tests failed" >&2
    exit 1
  fi
fi
if [ $need_python -eq 1 ]; then
  echo "== python venv in $LOGS/venv (python/build.sh)"
  bash "$REPO/python/build.sh" "$LOGS/venv" >"$LOGS/build-python.log" 2>&1 ||
    { tail -30 "$LOGS/build-python.log" >&2; echo "server-matrix: python/build.sh failed" >&2; exit 1; }
fi

# Run part $1 with PATH=$2:...; output to $3. Exit status: the part's.
run_part() {
  local part=$1 bin=$2 log=$3
  case $part in
    cli) PATH=$bin:$PATH bash "$REPO/cli/tests/run.sh" ;;
    cli:*) local names=${part#cli:}
           # shellcheck disable=SC2086 # one word per test name
           PATH=$bin:$PATH bash "$REPO/cli/tests/run.sh" ${names//,/ } ;;
    python) (cd "$REPO/python/tests" && PATH=$bin:$PATH "$LOGS/venv/bin/python" -m pytest \
               -p no:cacheprovider -q -rfE .) ;;
    python:*) (cd "$REPO/python/tests" && PATH=$bin:$PATH "$LOGS/venv/bin/python" -m pytest \
                 -p no:cacheprovider -q -rfE -k "${part#python:}" .) ;;
    *) PATH=$bin:$PATH ctest --test-dir "$BUILD" -R "^${part}\$" -V \
         --no-tests=error ;;
  esac >"$log" 2>&1
}

declare -A result
for k in "${!labels[@]}"; do
  for p in "${parts[@]}"; do
    log=$LOGS/${labels[$k]// /-}.${p//[:,\/]/_}.log
    t0=$(date +%s)
    if run_part "$p" "${bins[$k]}" "$log"; then r=pass; else r=FAIL; fi
    result[$k,$p]=$r
    echo "== ${labels[$k]} / $p: $r ($(( $(date +%s) - t0 )) s, $log)"
  done
done

# ---------------------------------------------------------------- matrix
# one row per part, one column per version (parts outnumber versions)
w=4
for p in "${parts[@]}"; do [ ${#p} -gt "$w" ] && w=${#p}; done
printf '\n%-*s' "$w" "part"
for k in "${!labels[@]}"; do printf ' | %-12s' "${labels[$k]}"; done
printf '\n'
failed=0
for p in "${parts[@]}"; do
  printf '%-*s' "$w" "$p"
  for k in "${!labels[@]}"; do
    printf ' | %-12s' "${result[$k,$p]}"
    [ "${result[$k,$p]}" = pass ] || failed=1
  done
  printf '\n'
done
exit $failed
