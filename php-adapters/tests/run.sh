#!/usr/bin/env bash
# The adapters' PHPUnit suites (symfony, laravel) against real redis-servers.
#
#   bash php-adapters/tests/run.sh [phpunit args...]
#   e.g. bash php-adapters/tests/run.sh --testsuite symfony
#        bash php-adapters/tests/run.sh --filter testBlockingWaitIsWokenByRelease
#
# Builds libdistlock and distlock.so (php-ext/build.sh; with the core of
# DISTLOCK_CORE_BUILD when set; or takes the one named by DISTLOCK_PHP_SO),
# starts one redis-server and three (tests/harness/redis.sh), passes them as
# DISTLOCK_TEST_SERVERS_1 and DISTLOCK_TEST_SERVERS_3, runs Debian's phpunit
# with php-adapters/phpunit.xml.dist and the module under test, stops the
# servers. DISTLOCK_TEST_PHP_SO names the module for the PHP processes the
# tests start themselves (a second process waiting on a lock). Exits non-zero if a test failed, erred, was skipped or risky, or
# none ran.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
adapters=$(cd "$here/.." && pwd)
repo=$(cd "$adapters/.." && pwd)
harness=$repo/tests/harness/redis.sh

phpunit=$(command -v phpunit || true)
[ -n "$phpunit" ] || { echo "php-adapters: phpunit not found (Debian package phpunit)" >&2; exit 1; }

if [ -n "${DISTLOCK_PHP_SO:-}" ]; then
  so=$DISTLOCK_PHP_SO
else
  so=$(bash "$repo/php-ext/build.sh" ${DISTLOCK_CORE_BUILD:+--core-build "$DISTLOCK_CORE_BUILD"} | tail -n 1)
fi
[ -f "$so" ] || { echo "php-adapters: no distlock.so at '$so'" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/distlock-adapters.XXXXXX")
cleanup() {
  bash "$harness" stop "$work/one" || true
  bash "$harness" stop "$work/three" || true
  rm -rf "$work"
}
trap cleanup EXIT

source "$repo/tests/harness/php-ini-without-distlock.sh"
without_system_distlock "$work" php-adapters

bash "$harness" start "$work/one" 1 >/dev/null
bash "$harness" start "$work/three" 3 >/dev/null
export DISTLOCK_TEST_SERVERS_1=$(bash "$harness" uris "$work/one")
export DISTLOCK_TEST_SERVERS_3=$(bash "$harness" uris "$work/three")
# the module for the PHP child processes the tests start (waiters)
export DISTLOCK_TEST_PHP_SO=$so
export TMPDIR=$work

set +e
php -d "extension=$so" -d error_reporting=-1 -d display_errors=stderr -d zend.exception_ignore_args=0 \
  "$phpunit" -c "$adapters/phpunit.xml.dist" --log-junit "$work/junit.xml" "$@"
status=$?
set -e

# PHPUnit exits 0 when a filter matches nothing: a run of no test is a failure here.
tests=$(php -r '$x = @simplexml_load_file($argv[1]); echo $x ? (int) $x->testsuite["tests"] : 0;' "$work/junit.xml")
echo "php-adapters: $tests test(s) run, phpunit exit $status"
[ "$status" -eq 0 ] && [ "$tests" -gt 0 ]
