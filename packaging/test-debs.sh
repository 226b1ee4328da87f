#!/usr/bin/env bash
# The Debian packages, as a user gets them: builds them from packaging/debian
# (packaging/build-debs.sh, its Build-Depends installed with apt-get build-dep),
# runs lintian on them (fails on an error, prints every tag), installs them on
# this machine with apt-get, and checks each against a throwaway redis-server:
#   libdistlock-dev  examples/hello.c built with pkg-config (and with CMake's
#                    find_package) and run; the installed header alone
#   distlock         `distlock run` takes the lock (another owner then gets 75)
#   php-distlock     enabled by phpenmod (no -d extension=): distributedLock()
#                    / distributedUnlock() with `php -r`; the adapters under
#                    /usr/share/php/Distlock/: a symfony/lock LockFactory lock
#                    (Debian's php-symfony-lock) through DistlockStore
#   python3-distlock Debian's python3 imports it from dist-packages, takes and
#                    releases a lock, and is refused a lock `distlock run` holds
# then purges them (also on failure: a trap) and checks that nothing is left
# (the PHP module disabled, the ini gone), so later suites that build from
# source see no system-wide distlock.
#   bash packaging/test-debs.sh [OUT_DIR]   (the .debs stay in OUT_DIR if given)
# Needs root (or sudo): apt-get. Refuses to run if a distlock package is already
# installed (it would purge what it did not install).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
work=$(mktemp -d "${TMPDIR:-/tmp}/distlock-test-debs.XXXXXX")
out=${1:-$work/debs}
mkdir -p "$out"
out=$(cd "$out" && pwd)
pkgs=(libdistlock0 libdistlock-dev distlock php-distlock python3-distlock)
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
installed=0

cleanup() {
  local st=$?
  bash "$top/tests/harness/redis.sh" stop "$work/redis" >/dev/null 2>&1 || true
  if [ "$installed" = 1 ]; then
    echo "purging ${pkgs[*]}"
    $SUDO apt-get purge -y -qq "${pkgs[@]}" >"$work/purge.log" 2>&1 \
      || { echo "FAIL apt-get purge"; cat "$work/purge.log"; st=1; }
  fi
  rm -rf "$work"
  exit "$st"
}
trap cleanup EXIT

for p in "${pkgs[@]}"; do
  if dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "installed"; then
    echo "test-debs: $p is already installed; purge it first (this test purges what it installs)" >&2
    exit 1
  fi
done

bash "$top/scripts/deps.sh" lintian
bash "$top/packaging/build-debs.sh" --install-build-deps "$out" >/dev/null
v=$(sed -n 's/^#define DISTLOCK_VERSION_STRING "\(.*\)"$/\1/p' core/include/distlock.h)
echo "== packages ($out)"
(cd "$out" && ls -l ./*.deb)

echo "== lintian"
# --fail-on error: exit non-zero on an error tag only; warnings are printed.
# (As root lintian says "running with root privileges is not recommended!".)
if lintian --fail-on error --tag-display-limit 0 "$out"/*.deb >"$work/lintian.log" 2>&1; then lint=0; else lint=1; fi
grep -v '^running with root privileges' "$work/lintian.log" || true
errors=$(grep -c '^E: ' "$work/lintian.log" || true)
echo "lintian: $errors error(s), $(grep -c '^W: ' "$work/lintian.log" || true) warning(s)"
if [ "$lint" -ne 0 ] || [ "$errors" -ne 0 ]; then echo "FAIL lintian reports errors"; exit 1; fi

echo "== apt-get install ./*.deb"
debs=()
for p in "${pkgs[@]}"; do debs+=("$out/${p}_${v}-"*"_$(dpkg --print-architecture).deb"); done
installed=1
$SUDO apt-get install -y -qq --no-install-recommends "${debs[@]}" >"$work/install.log" 2>&1 \
  || { echo "FAIL apt-get install"; cat "$work/install.log"; exit 1; }

pass=0; fail=0
check() { # name, command...
  local name=$1; shift
  if "$@" >"$work/out" 2>&1; then pass=$((pass+1)); echo "ok   $name"
  else fail=$((fail+1)); echo "FAIL $name"; sed 's/^/     /' "$work/out"; fi
}
has() { # file, pattern: the file holds a line matching the pattern
  grep -q -- "$2" "$1" || { echo "no line matching '$2' in:"; cat "$1"; return 1; }
}
export -f has   # for the checks' bash -c

port=$(bash tests/harness/redis.sh start "$work/redis" 1)
uri=redis://127.0.0.1:$port
rcli() { redis-cli -p "$port" "$@"; }
cd "$work"   # nothing of the checkout on any path from here

# libdistlock0 / libdistlock-dev
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
check "dpkg -L: libdistlock.so.0 in the multiarch libdir" \
  bash -c "dpkg -L libdistlock0 | grep -qx '/usr/lib/$multiarch/libdistlock.so.0'"
check "pkg-config --modversion distlock = $v" bash -c "[ \"\$(pkg-config --modversion distlock)\" = '$v' ]"
check "pkg-config: prefix /usr, so no -I/usr/include, -L/usr/lib nor ../ in its flags" bash -c "
  pkg-config --cflags --libs distlock | tee /dev/stderr | grep -q -- -ldistlock &&
  ! pkg-config --cflags --libs distlock | grep -qE '\.\./|-I/usr/include( |\$)|-L/usr/lib'"
check "hello.c built with pkg-config --cflags --libs" \
  bash -c "cc '$top/examples/hello.c' \$(pkg-config --cflags --libs distlock) -o hello"
check "hello linked to the packaged libdistlock.so.0" bash -c "
  [ \"\$(readlink -f \"\$(ldd ./hello | awk '/libdistlock.so.0/ {print \$3}')\")\" = \"\$(readlink -f /usr/lib/$multiarch/libdistlock.so.0)\" ]"
check "hello takes and releases a lock" bash -c "./hello '$uri' > hello.out && grep -q '^release: ' hello.out && grep -q '^holding order:42 ' hello.out"
check "hello.c built with CMake find_package(distlock) (shared and static)" \
  bash -c "cmake -S '$top/examples' -B ex >/dev/null && cmake --build ex >/dev/null"
check "CMake's hello_static runs" "$work/ex/hello_static" "$uri"
check "the installed header compiles alone (-std=c99 -pedantic -Werror)" bash -c "echo '#include <distlock.h>
int main(void){return DISTLOCK_VERSION_NUMBER == 0;}' | cc -std=c99 -pedantic -Wall -Wextra -Werror -x c - -o hdr"

# distlock (command and man page)
check "distlock --version says $v" bash -c "distlock --version | grep -q '$v'"
check "man page installed" test -f /usr/share/man/man1/distlock.1.gz
check "distlock run: the command runs under the lock" \
  bash -c "distlock run --servers '$uri' deb:cli -- sh -c 'redis-cli -p $port exists deb:cli' > run.out && has run.out '^1\$'"
check "distlock run: the key is released after the command" bash -c "[ \"\$(redis-cli -p $port exists deb:cli)\" = 0 ]"

# php-distlock: enabled the Debian way
phpv=$(php -r 'echo PHP_MAJOR_VERSION, ".", PHP_MINOR_VERSION;')
check "mods-available/distlock.ini, enabled for cli by phpenmod" \
  bash -c "test -f /etc/php/$phpv/mods-available/distlock.ini && phpquery -v $phpv -s cli -m distlock | grep -q Enabled"
check "php (no -d extension=) has distlock loaded from the packaged module" \
  bash -c "php -r 'exit(extension_loaded(\"distlock\") && (new ReflectionExtension(\"distlock\"))->getVersion() === \"$v\" ? 0 : 1);'"
cat > lock.php <<'EOF'
<?php
// take, see it held (a second owner is refused with 500002), release
$t = distributedLock('deb:php', 30);
try { distributedLock('deb:php', 30); echo "second lock: granted\n"; }
catch (Exception $e) { echo "second lock: refused ", $e->getCode(), "\n"; }
echo "unlock: ", var_export(distributedUnlock('deb:php', $t), true), "\n";
echo "unlock again: ", var_export(distributedUnlock('deb:php', $t), true), "\n";
EOF
check "php -r: distributedLock()/distributedUnlock()" \
  bash -c "php -d distlock.servers='$uri' -r \"\$(tail -n +2 lock.php)\" > php.out &&
           has php.out '^second lock: refused 500002\$' && has php.out '^unlock: true\$' && has php.out '^unlock again: 1\$'"

# php-distlock's adapters: `require 'Distlock/autoload.php'` from the include
# path finds the installed copy; a LockFactory lock on DistlockStore is held
# (a second Lock is refused) and released (the second then gets it).
cat > symfony.php <<'EOF'
<?php
require 'Distlock/autoload.php';
use Symfony\Component\Lock\LockFactory;
$file = (new ReflectionClass(Distlock\Symfony\DistlockStore::class))->getFileName();
echo "store: $file\n";
$factory = new LockFactory(new Distlock\Symfony\DistlockStore(new Distlock\Client()));
$lock = $factory->createLock('deb:symfony', 30);
$other = $factory->createLock('deb:symfony', 30);
echo "acquire: ", var_export($lock->acquire(), true), "\n";
echo "second: ", var_export($other->acquire(), true), "\n";
$lock->release();
echo "after release: ", var_export($other->acquire(), true), "\n";
$other->release();
EOF
check "php: a symfony/lock LockFactory lock on the installed Distlock\\Symfony\\DistlockStore" \
  bash -c "php -d distlock.servers='$uri' symfony.php > symfony.out &&
           has symfony.out '^store: /usr/share/php/Distlock/Symfony/DistlockStore.php\$' &&
           has symfony.out '^acquire: true\$' && has symfony.out '^second: false\$' &&
           has symfony.out '^after release: true\$'"

# python3-distlock: Debian's python3, from dist-packages
check "python3 imports distlock from /usr/lib/python3/dist-packages" \
  /usr/bin/python3 -c "import distlock, sys; sys.exit(0 if distlock.__file__.startswith('/usr/lib/python3/dist-packages/distlock/') and distlock.__version__ == '$v' else 1)"
check "python3: a lock taken and released" /usr/bin/python3 -c "
import distlock
c = distlock.Client('$uri')
with c.lock('deb:py', ttl=30) as l:
    assert l.token, 'no token'
    assert c.lock('deb:py').acquire(blocking=False) is False, 'second owner got it'
assert c.lock('deb:py').acquire(blocking=False), 'not free after release'
"
# one lock across the packages: Python is refused what `distlock run` holds
check "python3 refused a lock held by distlock run; run exits 75 while PHP holds one" bash -c "
  distlock run --servers '$uri' deb:x -- /usr/bin/python3 -c \"
import distlock, sys
sys.exit(0 if distlock.Client('$uri').lock('deb:x').acquire(blocking=False) is False else 3)\" &&
  php -d distlock.servers='$uri' -r '\$t = distributedLock(\"deb:y\", 30);
    passthru(\"distlock run --servers $uri deb:y -- true\", \$rc); distributedUnlock(\"deb:y\", \$t); exit(\$rc === 75 ? 0 : 1);'"

cd "$top"
echo "== apt-get purge"
$SUDO apt-get purge -y -qq "${pkgs[@]}" >"$work/purge.log" 2>&1 \
  || { echo "FAIL apt-get purge"; cat "$work/purge.log"; exit 1; }
installed=0
check "after purge: no package, no ini, no module loaded, no python module" bash -c "
  ! dpkg-query -W -f='\${Status}\n' ${pkgs[*]} 2>/dev/null | grep -q installed &&
  ! ls /etc/php/*/*/conf.d/*distlock* /etc/php/*/mods-available/distlock.ini 2>/dev/null | grep -q . &&
  php -r 'exit(extension_loaded(\"distlock\") ? 1 : 0);' && ! test -e /usr/share/php/Distlock &&
  ! (cd / && /usr/bin/python3 -c 'import distlock' 2>/dev/null)"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
