#!/usr/bin/env bash
# The PHP extension's test suite (phpt, run-tests.php) against real redis-servers.
#
#   bash php-ext/tests/run.sh [--valgrind] [run-tests.php args / test files...]
#
# Builds libdistlock and distlock.so (php-ext/build.sh; with the core of
# DISTLOCK_CORE_BUILD when set; or takes the one named by DISTLOCK_PHP_SO), starts one redis-server
# for the single-node tests and three for Redlock (tests/harness/redis.sh),
# runs every php-ext/tests/*.phpt with the built module, stops the servers,
# and exits non-zero if any test failed, was borked, skipped or leaked.
# --valgrind reruns nothing itself: it passes -m (USE_ZEND_ALLOC=0 + valgrind).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ext_src=$(cd "$here/.." && pwd)
repo=$(cd "$ext_src/.." && pwd)
harness=$repo/tests/harness/redis.sh

valgrind=0
args=()
for a in "$@"; do
  if [ "$a" = "--valgrind" ]; then valgrind=1; else args+=("$a"); fi
done

# The committed arginfo must come from the committed stub (gen_stub.php needs
# a download, so CI checks the hash instead of regenerating, as phpredis does).
stub_sha=$(sha1sum "$ext_src/distlock.stub.php" | cut -d' ' -f1)
if ! grep -q "Stub hash: $stub_sha" "$ext_src/distlock_arginfo.h"; then
  echo "php-ext: distlock_arginfo.h is stale: regenerate it with php-ext/gen_stub.sh" >&2
  exit 1
fi

# The stub carries the docs: a docblock on every function, method, class and
# constant, with its @param and @return.
php "$here/check-stub-docs.php" "$ext_src/distlock.stub.php"

# packaging/package.xml (PECL) must list exactly the extension's sources and
# tests, and the core's sources it bundles (core/..., from the top-level core/;
# packaging/pecl-package.sh stages them the same way).
php -r '
  $x = simplexml_load_file($argv[1]);
  $x->registerXPathNamespace("p", "http://pear.php.net/dtd/package-2.0");
  $listed = array_map("strval", $x->xpath("//p:file/@name"));
  [$dir, $top] = [$argv[2], $argv[3]];
  $rel = fn($base, $files) => array_map(fn($f) => substr($f, strlen($base) + 1), $files);
  $want = array_merge(
      $rel($dir, array_merge(glob("$dir/*.{c,h,m4}", GLOB_BRACE), ["$dir/distlock.stub.php", "$dir/README.md"],
                             glob("$dir/tests/*.phpt"), glob("$dir/tests/fixtures/*"))),
      $rel($top, array_merge(["$top/core/include/distlock.h"], glob("$top/core/src/*.{c,h}", GLOB_BRACE))),
      ["LICENSE"]);
  $where = fn($f) => str_starts_with($f, "core/") || $f === "LICENSE" ? "$top/$f" : "$dir/$f";
  $missing = array_diff($want, $listed);
  $stale = array_filter($listed, fn($f) => !file_exists($where($f)));
  foreach ($missing as $f) fwrite(STDERR, "packaging/package.xml does not list $f (" . $where($f) . ")\n");
  foreach ($stale as $f) fwrite(STDERR, "packaging/package.xml lists $f, but " . $where($f) . " does not exist\n");
  exit($missing || $stale ? 1 : 0);
' "$repo/packaging/package.xml" "$ext_src" "$repo"

# DISTLOCK_PHP_SO: test that distlock.so (e.g. the one `pecl install` put in
# the extension dir: packaging/test-pecl.sh) instead of building one.
if [ -n "${DISTLOCK_PHP_SO:-}" ]; then
  so=$DISTLOCK_PHP_SO
else
  # DISTLOCK_CORE_BUILD: a CMake build dir whose libdistlock.a to link
  # (scripts/test.sh shares its build/), instead of building the core again.
  so=$(bash "$ext_src/build.sh" ${DISTLOCK_CORE_BUILD:+--core-build "$DISTLOCK_CORE_BUILD"} | tail -n 1)
fi
[ -f "$so" ] || { echo "php-ext: no distlock.so at '$so'" >&2; exit 1; }

run_tests=""
for cand in "$(php-config --extension-dir)/build/run-tests.php" \
            "$(php-config --prefix)/lib/php/build/run-tests.php" /usr/lib/php/*/build/run-tests.php; do
  if [ -f "$cand" ]; then run_tests=$cand; break; fi
done
[ -f "$run_tests" ] || { echo "php-ext: run-tests.php not found (php-dev)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/distlock-phpt.XXXXXX")
cleanup() {
  bash "$harness" stop "$work/single" || true
  bash "$harness" stop "$work/redlock" || true
  bash "$harness" stop "$work/tls" || true
  bash "$harness" stop "$work/sentinel" || true
  bash "$harness" stop "$work/repl" || true
  bash "$harness" stop "$work/cluster" || true
  rm -rf "$work"
}
trap cleanup EXIT
source "$repo/tests/harness/php-ini-without-distlock.sh"
without_system_distlock "$work" php-ext
bash "$harness" start "$work/single" 1 >/dev/null
bash "$harness" start "$work/redlock" 3 >/dev/null
# TLS: a CA and certificates made for this run, one server with a TLS port
bash "$repo/tests/harness/certs.sh" "$work/certs"
DISTLOCK_TLS_CERTS=$work/certs bash "$harness" start "$work/tls" 1 >/dev/null
export DISTLOCK_TEST_TLS=$(bash "$harness" tls-uris "$work/tls")
export DISTLOCK_TEST_CERTS=$work/certs
# A Sentinel group (1 master, 2 replicas, 3 sentinels) for 073_sentinel.phpt.
export DISTLOCK_TEST_SENTINEL=$(bash "$harness" sentinels "$work/sentinel" \
  --data-pass data-pw --sentinel-user sent --sentinel-pass sentinel-pw)
# A Redis Cluster of 3 masters, no replicas, for 074_cluster.phpt.
export DISTLOCK_TEST_CLUSTER=$(bash "$harness" cluster "$work/cluster" 3 0)

export DISTLOCK_TEST_REDIS=$(bash "$harness" uris "$work/single")
export DISTLOCK_TEST_REDLOCK=$(bash "$harness" uris "$work/redlock")
# WAIT for replicas: a master and its replica ("MASTER_PORT REPLICA_PORT REPLICA_PID")
bash "$harness" start "$work/repl" 2 >/dev/null
export DISTLOCK_TEST_REPL=$(bash "$harness" replicate "$work/repl")
export DISTLOCK_TEST_REDIS_SOCK=$(ls "$work"/single/redis-*.sock | head -n 1)
export DISTLOCK_EXT_SO=$so
export TEST_PHP_EXECUTABLE=$(command -v php)
export TEST_PHP_CGI_EXECUTABLE=$(command -v php-cgi)
export NO_INTERACTION=1
export REPORT_EXIT_STATUS=1
export TMPDIR=$work

rt_args=(-q --show-diff -d "extension=$so" -j1)
[ "$valgrind" = 1 ] && rt_args+=(-m)
if [ ${#args[@]} -eq 0 ]; then
  args=("$here")
fi

set +e
php "$run_tests" "${rt_args[@]}" "${args[@]}" 2>&1 | tee "$work/run-tests.log"
status=${PIPESTATUS[0]}
set -e

summary=$(sed -n '/^Number of tests/,/^Time taken/p' "$work/run-tests.log")
count() { echo "$summary" | sed -n "s/^Tests $1 *: *\([0-9]*\).*/\1/p" | head -n 1; }
passed=$(count passed); failed=$(count failed); skipped=$(count skipped)
borked=$(count borked)
leaked=$(count leaked)
warned=$(count warned)
passed=${passed:-0}; failed=${failed:-0}; skipped=${skipped:-0}; borked=${borked:-0}; leaked=${leaked:-0}; warned=${warned:-0}
bad=$((failed + borked + leaked + warned))

echo "php-ext: $passed passed, $((failed + borked + leaked + warned + skipped)) failed"
if [ "$passed" -eq 0 ] || [ "$bad" -ne 0 ] || [ "$skipped" -ne 0 ] || [ "$status" -ne 0 ]; then
  [ "$skipped" -ne 0 ] && echo "php-ext: $skipped test(s) skipped: every test must run here" >&2
  exit 1
fi
