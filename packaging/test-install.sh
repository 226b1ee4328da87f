#!/usr/bin/env bash
# Install distlock into a scratch prefix and build examples/hello.c the three
# ways a user would: pkg-config (shared), pkg-config --static, CMake
# find_package (shared and static targets); run each against a real server.
# Also checks that the shared library exports nothing but distlock_*.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
work=$(mktemp -d)
trap '"$top/tests/harness/redis.sh" stop "$work/redis"; rm -rf "$work"' EXIT

pass=0; fail=0
check() { # name, command...
  local name=$1; shift
  if "$@" >"$work/out" 2>&1; then pass=$((pass+1)); echo "ok   $name"
  else fail=$((fail+1)); echo "FAIL $name"; sed 's/^/     /' "$work/out"; fi
}

cmake --install "$build" --prefix "$work/prefix" >/dev/null
libdir=$(find "$work/prefix" -name distlock.pc -printf '%h\n' | head -1)
export PKG_CONFIG_PATH=$libdir
port=$("$top/tests/harness/redis.sh" start "$work/redis" 1)
uri=redis://127.0.0.1:$port

exports() {
  local bad
  bad=$(nm -D --defined-only "$work"/prefix/lib*/libdistlock.so | awk '$2 != "A" {print $3}' | grep -v '^distlock_' || true)
  [ -z "$bad" ] || { echo "unexpected exports: $bad"; return 1; }
}
soname() { objdump -p "$work"/prefix/lib*/libdistlock.so | grep -q 'SONAME *libdistlock.so.0$'; }
check "exports only distlock_*" exports
check "SONAME libdistlock.so.0" soname
check "pkg-config shared build" bash -c "cc '$top/examples/hello.c' \$(pkg-config --cflags --libs distlock) -Wl,-rpath,'$libdir/..' -o '$work/h1'"
check "pkg-config shared run" "$work/h1" "$uri"
check "pkg-config static build" bash -c "cc '$top/examples/hello.c' \$(pkg-config --cflags distlock) '$libdir/../libdistlock.a' \$(pkg-config --libs --static distlock | sed 's/-ldistlock//') -o '$work/h2'"
check "pkg-config static run" "$work/h2" "$uri"
check "static binary has no libdistlock.so dependency" bash -c "test -x '$work/h2' && ! ldd '$work/h2' | grep -q libdistlock"
check "cmake find_package configure+build" bash -c "cmake -S '$top/examples' -B '$work/ex' -DCMAKE_PREFIX_PATH='$work/prefix' -DCMAKE_BUILD_RPATH='$libdir/..' >/dev/null && cmake --build '$work/ex' >/dev/null"
check "cmake distlock::distlock run" "$work/ex/hello" "$uri"
check "cmake distlock::distlock_static run" "$work/ex/hello_static" "$uri"
check "installed header compiles standalone with -pedantic -Werror" bash -c "echo '#include <distlock.h>
int main(void){return DISTLOCK_VERSION_NUMBER == 0;}' | cc -std=c99 -pedantic -Wall -Wextra -Werror -I'$work/prefix/include' -x c - -o '$work/hdr'"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
