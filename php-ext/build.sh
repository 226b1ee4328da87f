#!/usr/bin/env bash
# Build the distlock PHP extension from this checkout: the C core with CMake
# (static, PIC), then the extension with phpize/configure/make, linked against it.
# The last line on stdout is the absolute path of the built distlock.so.
#
#   php-ext/build.sh [--core-build DIR] [--out DIR]
#     --core-build DIR  use the core already built in this CMake build dir (the
#                       top-level CMake's php-ext target passes its own)
#     --out DIR         where to build (default: $DISTLOCK_PHP_BUILD_DIR or php-ext/build)
#
# Needs the Debian packages of scripts/deps.sh (php-dev, cmake, libhiredis-dev).
# phpize writes into the directory it runs in, so the sources are copied into
# the build dir first: the checkout stays clean.
set -euo pipefail

ext_src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$ext_src/.." && pwd)
out=${DISTLOCK_PHP_BUILD_DIR:-$ext_src/build}
core_build=""

while [ $# -gt 0 ]; do
  case "$1" in
    --core-build) core_build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/build.log

# Several callers (tests, demo, bench) may build at once: one at a time.
exec 9> "$out/.lock"
flock 9
: > "$log"

fail() {
  echo "build.sh: $1 failed; last lines of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
}

for tool in cmake phpize php-config pkg-config make cc; do
  command -v "$tool" >/dev/null || { echo "build.sh: $tool not found (run scripts/deps.sh)" >&2; exit 1; }
done

if [ -z "$core_build" ]; then
  core_build=$out/core-build
  echo "build.sh: building libdistlock in $core_build" >&2
  cmake -S "$repo" -B "$core_build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDISTLOCK_BUILD_TESTS=OFF -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF \
    >> "$log" 2>&1 || fail "cmake configure"
  cmake --build "$core_build" --target distlock_static -j "$(nproc)" >> "$log" 2>&1 \
    || fail "cmake build of libdistlock.a"
fi
core_build=$(cd "$core_build" && pwd)
[ -f "$core_build/core/libdistlock.a" ] || { echo "build.sh: $core_build/core/libdistlock.a missing" >&2; exit 1; }

ext=$out/ext
mkdir -p "$ext"
# Copy only what changed so make's timestamps stay meaningful.
for f in config.m4 distlock.c distlock_client_cache.c distlock_errors.c distlock_compat.c \
         distlock_client.c distlock_lock.c distlock_args.c \
         php_distlock.h php_distlock_int.h distlock_arginfo.h distlock.stub.php; do
  cmp -s "$ext_src/$f" "$ext/$f" || cp "$ext_src/$f" "$ext/$f"
done

cd "$ext"
stamp="$core_build|$(sha1sum config.m4 | cut -d' ' -f1)"
if [ ! -f Makefile ] || [ "$(cat .configured 2>/dev/null)" != "$stamp" ]; then
  echo "build.sh: phpize && ./configure --with-distlock=$core_build" >&2
  { phpize --clean && phpize; } >> "$log" 2>&1 || fail "phpize"
  ./configure --with-distlock="$core_build" >> "$log" 2>&1 || fail "configure"
  echo "$stamp" > .configured
fi
# libdistlock.a is not a make prerequisite of the module: relink when it is
# newer (only then, so a distlock.so another process is about to load stays).
if [ ! -f modules/distlock.so ] || [ "$core_build/core/libdistlock.a" -nt modules/distlock.so ]; then
  rm -f distlock.la .libs/distlock.so modules/distlock.so
fi
make -j "$(nproc)" >> "$log" 2>&1 || fail "make"
[ -f modules/distlock.so ] || fail "make (no modules/distlock.so)"

# It must load and carry the core's symbols (static link, nothing undefined but libc/hiredis/php).
php -n -d extension="$ext/modules/distlock.so" -r 'exit(function_exists("distributedLock") ? 0 : 1);' \
  >> "$log" 2>&1 || fail "loading the built distlock.so"
echo "$ext/modules/distlock.so"
