#!/usr/bin/env bash
# The PECL package, as a PHP user gets it (suite `pecl` of scripts/test.sh):
#  1. packaging/pecl-package.sh: `pecl package` of packaging/package.xml gives
#     distlock-X.Y.Z.tgz (X.Y.Z: core/include/distlock.h); it carries LICENSE
#     as a file, config.m4 and the bundled core/.
#  2. `pecl install ./distlock-X.Y.Z.tgz` answering its one question with the
#     default (Enter: autodetect). With no libdistlock known to pkg-config
#     (a fresh Debian) configure must take the bundled core, and distlock.so
#     must then need no libdistlock and export nothing but get_module; with
#     one, distlock.so must link it. pecl installs into the system PHP's
#     extension dir (its --installroot/--packagingroot options do not work for
#     compiled extensions in PEAR 1.10.13) but keeps its registry in a private
#     PEAR config; the trap uninstalls, so other suites never see it. A
#     distlock.so already in the extension dir (e.g. Debian's php-distlock) is
#     never overwritten: the test fails and says so.
#  3. `php -d extension=distlock`: a lock taken, refused to a second caller,
#     released, against a throwaway redis-server; then every phpt test of
#     php-ext/tests against the installed module (php-ext/tests/run.sh with
#     DISTLOCK_PHP_SO).
#  4. the other way. When step 2 took the bundled core: libdistlock built and
#     installed by CMake into a temp prefix, put on PKG_CONFIG_PATH, and
#     `pecl install` again: configure must take it, distlock.so must link
#     libdistlock.so.0, and the lock of step 3 must work through it. When step
#     2 took an installed libdistlock: `pecl install` again answering
#     "bundled", and the same checks of the bundled build.
# Usage: bash packaging/test-pecl.sh        (needs scripts/deps.sh: php-dev, php-pear)
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
harness=$top/tests/harness/redis.sh
command -v pecl >/dev/null || { echo "test-pecl: pecl not found (Debian php-pear; scripts/deps.sh)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/distlock-pecl.XXXXXX")
extdir=$(php-config --extension-dir)
so=$extdir/distlock.so
installed=0
cleanup() {
  local rc=$?
  bash "$harness" stop "$tmp/redis" >/dev/null 2>&1 || true
  if [ "$installed" = 1 ]; then
    pecl -c "$tmp/pear.conf" uninstall distlock > "$tmp/uninstall.log" 2>&1 || cat "$tmp/uninstall.log" >&2
    if [ -e "$so" ]; then echo "test-pecl: pecl uninstall left $so; removing it" >&2; rm -f "$so"; rc=1; fi
  fi
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT
fail() { echo "test-pecl: FAIL $*" >&2; exit 1; }
ok() { echo "test-pecl: ok   $*"; }

# One system install at a time (two test runs on one machine).
exec 9> "${TMPDIR:-/tmp}/distlock-pecl-install.lock"
flock 9

# ---- 1. the tarball
tgz=$(bash "$top/packaging/pecl-package.sh" "$tmp/dist" | tail -n 1)
hdr=$top/core/include/distlock.h
v=$(sed -n 's/^#define DISTLOCK_VERSION_STRING "\(.*\)"$/\1/p' "$hdr")
[ "$(basename "$tgz")" = "distlock-$v.tgz" ] || fail "tarball $(basename "$tgz"), want distlock-$v.tgz"
listing=$(tar tvzf "$tgz")
for need in package.xml "distlock-$v/LICENSE" "distlock-$v/config.m4" "distlock-$v/core/include/distlock.h" \
            "distlock-$v/core/src/client.c" "distlock-$v/distlock.c" "distlock-$v/tests/001_load.phpt"; do
  grep -q " $need\$" <<<"$listing" || fail "$(basename "$tgz") lacks $need"
done
if grep -q '^l' <<<"$listing"; then fail "$(basename "$tgz") carries a symbolic link"; fi
grep -q "MIT License" <(tar xOzf "$tgz" "distlock-$v/LICENSE") || fail "LICENSE in the tarball is not the MIT text"
ok "$(basename "$tgz"): $(stat -c %s "$tgz") bytes, $(wc -l <<<"$listing") entries"

# ---- 2. pecl install
[ -e "$so" ] && fail "$so already exists ($(dpkg -S "$so" 2>/dev/null || echo 'not from a Debian package')): not overwriting it"
pear config-create "$tmp/pear" "$tmp/pear.conf" >/dev/null
installed=1
set +e
# Enter = the default answer to the with-distlock question (autodetect).
printf '\n' | pecl -c "$tmp/pear.conf" install "$tgz" > "$tmp/install.log" 2>&1
st=$?
set -e
echo "test-pecl: last lines of pecl install:"
tail -n 4 "$tmp/install.log" | sed 's/^/    /'
[ $st -eq 0 ] || { cat "$tmp/install.log" >&2; fail "pecl install exited $st"; }
grep -q "^install ok: channel://pecl.php.net/distlock-$v\$" "$tmp/install.log" || fail "pecl install did not say install ok"
[ -f "$so" ] || fail "pecl install did not put distlock.so in $extdir"
ok "pecl install: $so ($(stat -c %s "$so") bytes)"

needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
mode=bundled
if pkg-config --exists distlock 2>/dev/null; then
  mode=pkg-config
  grep -q "^configure: libdistlock: pkg-config\$" "$tmp/install.log" || fail "libdistlock-dev is installed, but configure did not take it"
  grep -q "libdistlock\.so" <<<"$needed" || fail "distlock.so does not link libdistlock ($needed)"
  ok "configure took the installed libdistlock (pkg-config $(pkg-config --modversion distlock)); NEEDED: $needed"
else
  grep -q "^configure: libdistlock: bundled\$" "$tmp/install.log" || fail "configure did not build the bundled core"
  if grep -q "libdistlock" <<<"$needed"; then fail "bundled build links libdistlock ($needed)"; fi
  exported=$(nm -D --defined-only "$so" | awk '{print $3}' | tr '\n' ' ')
  [ "$exported" = "get_module " ] || fail "distlock.so exports more than get_module: $exported"
  ok "configure built the bundled core; NEEDED: $needed; exports: $exported"
fi

# ---- 3. use it
bash "$harness" start "$tmp/redis" 1 >/dev/null
uri=$(bash "$harness" uris "$tmp/redis")
# smoke LABEL [VAR=VALUE...]: through `php -d extension=distlock` (the
# extension dir's module), a lock taken, refused to a second caller, released.
smoke() {
  local label=$1 out expect left
  shift
  out=$(env "$@" php -n -d extension=distlock -d "distlock.servers=$uri" -r '
    $token = distributedLock("pecl:smoke", 30);
    try { distributedLock("pecl:smoke", 30); echo "second: acquired\n"; }
    catch (Exception $e) { echo "second: refused ", $e->getCode(), "\n"; }
    var_dump(distributedUnlock("pecl:smoke", $token));
    $c = new Distlock\Client(ini_get("distlock.servers"));
    $l = $c->tryLock("pecl:smoke", 5.0);
    echo "after release: ", $l !== null && $l->isHeld() ? "held" : "not held", "\n";
    $l->release();
    echo "version ", phpversion("distlock"), "\n";
  ')
  expect="second: refused 500002
bool(true)
after release: held
version $v"
  [ "$out" = "$expect" ] || { printf 'got:\n%s\nwant:\n%s\n' "$out" "$expect" >&2; fail "$label: php -d extension=distlock"; }
  left=$(redis-cli -u "$uri" --raw exists pecl:smoke)   # nothing left behind
  [ "$left" = 0 ] || fail "$label: the key is still there after the releases"
  ok "$label: php -d extension=distlock: lock taken, refused to a second caller (500002), released; Client/Lock; version $v"
}
smoke "$mode"

echo "test-pecl: the phpt tests against the installed module ($mode)"
DISTLOCK_PHP_SO=$so bash "$top/php-ext/tests/run.sh"

# ---- 4. the other way: an installed libdistlock that pkg-config finds
if [ "$mode" = bundled ]; then
  echo "test-pecl: libdistlock installed by CMake into a prefix, on PKG_CONFIG_PATH; pecl install again"
  prefix=$tmp/prefix
  { cmake -S "$top" -B "$tmp/cmake" -DDISTLOCK_BUILD_TESTS=OFF -DDISTLOCK_BUILD_CLI=OFF \
      -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib &&
    cmake --build "$tmp/cmake" -j2 && cmake --install "$tmp/cmake"; } > "$tmp/cmake.log" 2>&1 \
    || { tail -n 30 "$tmp/cmake.log" >&2; fail "CMake build/install of libdistlock"; }
  pecl -c "$tmp/pear.conf" uninstall distlock > "$tmp/uninstall.log" 2>&1 || { cat "$tmp/uninstall.log" >&2; fail "pecl uninstall"; }
  installed=0
  [ ! -e "$so" ] || fail "pecl uninstall left $so"
  installed=1
  set +e
  printf '\n' | PKG_CONFIG_PATH=$prefix/lib/pkgconfig pecl -c "$tmp/pear.conf" install "$tgz" > "$tmp/install2.log" 2>&1
  st=$?
  set -e
  [ $st -eq 0 ] || { tail -n 40 "$tmp/install2.log" >&2; fail "pecl install with libdistlock on PKG_CONFIG_PATH exited $st"; }
  grep -q "^configure: libdistlock: pkg-config\$" "$tmp/install2.log" || fail "configure did not take the libdistlock pkg-config found"
  needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  grep -q "libdistlock\.so\.0" <<<"$needed" || fail "distlock.so does not link libdistlock.so.0 ($needed)"
  ok "configure took libdistlock $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion distlock) from pkg-config; NEEDED: $needed"
  smoke pkg-config LD_LIBRARY_PATH="$prefix/lib"
else
  # A libdistlock is installed here (libdistlock-dev?): the bundled core is
  # what the answer "bundled" gives.
  echo "test-pecl: pecl install again, answering the question with: bundled"
  pecl -c "$tmp/pear.conf" uninstall distlock > "$tmp/uninstall.log" 2>&1 || { cat "$tmp/uninstall.log" >&2; fail "pecl uninstall"; }
  installed=0
  [ ! -e "$so" ] || fail "pecl uninstall left $so"
  installed=1
  set +e
  printf 'bundled\n' | pecl -c "$tmp/pear.conf" install "$tgz" > "$tmp/install2.log" 2>&1
  st=$?
  set -e
  [ $st -eq 0 ] || { tail -n 40 "$tmp/install2.log" >&2; fail "pecl install (bundled) exited $st"; }
  grep -q "^configure: libdistlock: bundled\$" "$tmp/install2.log" || fail "configure did not build the bundled core"
  needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  if grep -q "libdistlock" <<<"$needed"; then fail "bundled build links libdistlock ($needed)"; fi
  ok "configure built the bundled core; NEEDED: $needed"
  smoke bundled
fi
