#!/usr/bin/env bash
# Every test of distlock, from a fresh clone on Debian 12: installs what it
# needs (apt), then runs each part's suite against throwaway redis-servers:
#   C core (cmocka via CTest; again under ASan+UBSan; threads under TSan;
#   valgrind), install/packaging, release (one version everywhere, the ABI
#   against its baseline), fuzz (libFuzzer targets under ASan+UBSan, under a
#   minute; DISTLOCK_FUZZ_SECONDS per target for longer), PHP extension
#   (phpt), the PECL tarball (pecl package + pecl install + phpt against the
#   installed module), Python package (pytest), its sdist and wheel installed
#   into fresh venvs (pydist), the distlock command, the quick-start demo
#   itself, and last the Debian packages (built, lintian, installed with apt,
#   checked, purged: packaging/test-debs.sh).
# Exits non-zero if any suite fails. Usage: bash scripts/test.sh [suite...]
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

bash scripts/deps.sh || { echo "scripts/deps.sh failed" >&2; exit 1; }

suites=(c install release fuzz php pecl python pydist cli demo deb)
[ $# -gt 0 ] && suites=("$@")

run_suite() {
  case "$1" in
    c)       bash tests/run-c-tests.sh ;;
    install) cmake -S . -B build -DDISTLOCK_BUILD_TESTS=OFF >/dev/null &&
             cmake --build build -j2 >/dev/null && bash packaging/test-install.sh build ;;
    release) bash scripts/check-version.sh; local v=$?
             bash packaging/abi/check-abi.sh && [ $v -eq 0 ] ;;
    fuzz)    bash tests/fuzz/run.sh ;;
    php)     bash php-ext/tests/run.sh ;;
    pecl)    bash packaging/test-pecl.sh ;;
    python)  bash python/tests/run.sh ;;
    pydist)  bash python/tests/dist.sh ;;
    cli)     bash cli/tests/run.sh ;;
    demo)    bash scripts/demo.sh ;;
    deb)     bash packaging/test-debs.sh ;;
    *)       echo "unknown suite $1" >&2; return 2 ;;
  esac
}

passed=0; failed=0; failed_names=()
for s in "${suites[@]}"; do
  echo
  echo "=================== suite: $s ==================="
  start=$(date +%s)
  if run_suite "$s"; then
    passed=$((passed + 1)); verdict=PASS
  else
    failed=$((failed + 1)); failed_names+=("$s"); verdict=FAIL
  fi
  echo "=================== $s: $verdict ($(( $(date +%s) - start )) s) ==================="
done
echo
[ $failed -gt 0 ] && echo "failed suites: ${failed_names[*]}"
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
