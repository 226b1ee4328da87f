#!/usr/bin/env bash
# Every test of distlock, from a fresh clone on Debian 12: installs what it
# needs (apt), then runs each part's suite against throwaway redis-servers.
#
#   bash scripts/test.sh          the full run (what .ci/run calls)
#   bash scripts/test.sh quick    the quick tier: what a change needs day to day
#   bash scripts/test.sh SUITE... the named suites, one after another
#
# Suites:
#   c         C core (tests/run-c-tests.sh): every test once under ASan+UBSan,
#             the tests labeled threads under TSan, those labeled valgrind
#             under valgrind, the stack budget of every entry point
#   c-quick   the ASan+UBSan pass without the tests labeled slow (failovers,
#             chaos); both run check_layers (tests/check-layers.py)
#   install   install/packaging into a prefix (pkg-config, CMake)
#   release   one version everywhere, the ABI against its baseline, a reference
#             page (docs/reference/) for every exported function, the newest
#             bench/results file a full run with every figure, and the bench's
#             adapters measurement (bench/test_adapters_section.py)
#   fuzz      libFuzzer targets under ASan+UBSan, under a minute
#             (DISTLOCK_FUZZ_SECONDS per target for longer)
#   php       the PHP extension's phpt suite
#   pecl      the PECL tarball (pecl package + pecl install + phpt against the
#             installed module)
#   php-adapters  the Symfony Lock store and Laravel lock driver (php-adapters/,
#             PHPUnit against Debian's symfony/lock and illuminate/cache)
#   python    the Python package (pytest, typing)
#   python-quick  its pytest suite only (no second install, example, typing)
#   pydist    its sdist and wheel installed into fresh venvs
#   cli       the distlock command
#   demo      the quick-start demo itself
#   docs      every c, sh, php and python snippet of the docs, run
#             (tests/check-doc-snippets.sh)
#   deb       the Debian packages (built, lintian, installed with apt,
#             checked, purged: packaging/test-debs.sh)
#
# quick = c-quick, php, php-adapters, python-quick, cli, docs: every behaviour once against real
# Redis, the C tests under ASan+UBSan, each front end's suite, the docs' snippets. The full run adds the
# slow C tests, TSan, valgrind, the stack budget, fuzz, packaging (install,
# release, pecl, pydist, deb) and the demo.
#
# Each configuration is built once: build/ (RelWithDebInfo: the library, the
# distlock command, the valgrind binaries) is shared by the C valgrind stage,
# install, cli and php; whichever needs it first builds it (under its lock,
# build/.cmake.lock), the others find it built. Independent suites run in
# lanes at once: the C and front-end tests mostly wait on their redis-servers
# (the quick tier used 100 s of CPU in 300 s), so 2 cores carry four lanes;
# the sanitizer builds widen their time bounds with DISTLOCK_TEST_SLOW, and
# the C stages run their tests with ctest -j, longest first (COST):
#   full:  c-asan (ctest -j3), python, docs | c-tsan (-j2), demo | c-valgrind, cli |
#          c-stack, release, install, fuzz, pydist, pecl, php, php-adapters;
#          then deb, last and alone (it installs the packages system-wide
#          with apt). The lanes take 400-450 s each on a loaded 2-core
#          machine; none can be shorter than c-asan's build and its
#          longest test, test_sentinel_faults (about 270 s together).
#   quick: c-quick (ctest -j3) | cli | python-quick, php, php-adapters, docs
# (docs builds the Python package in the source tree, as python does: the
# two share a lane so they never build it at once)
# Each suite's output goes to a log, printed whole when the suite ends.
# Exits non-zero if any suite fails.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

bash scripts/deps.sh || { echo "scripts/deps.sh failed" >&2; exit 1; }

export DISTLOCK_TEST_BUILD_ROOT=${DISTLOCK_TEST_BUILD_ROOT:-$top}
shared=$DISTLOCK_TEST_BUILD_ROOT/build
logs=$DISTLOCK_TEST_BUILD_ROOT/build-test-logs
mkdir -p "$logs"

# build/, once: the library (shared and static), the distlock command.
# The same configuration as tests/run-c-tests.sh's valgrind stage, under the
# same lock (build/.cmake.lock): one cmake at a time in the tree.
build_shared() {
  mkdir -p "$shared"
  flock "$shared/.cmake.lock" cmake -S "$top" -B "$shared" -DDISTLOCK_BUILD_TESTS=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >>"$logs/build-shared.log" 2>&1 &&
  flock "$shared/.cmake.lock" cmake --build "$shared" -j2 --target distlock distlock_static distlock_cli \
    >>"$logs/build-shared.log" 2>&1 || { tail -n 40 "$logs/build-shared.log"; return 1; }
}

run_suite() {
  case "$1" in
    c)       bash tests/run-c-tests.sh ;;
    c-quick) DISTLOCK_TEST_STAGES=asan DISTLOCK_TEST_QUICK=1 DISTLOCK_TEST_JOBS=${DISTLOCK_TEST_JOBS:-3} \
               bash tests/run-c-tests.sh ;;
    c-asan)  DISTLOCK_TEST_STAGES=asan DISTLOCK_TEST_JOBS=${DISTLOCK_TEST_JOBS:-3} \
               bash tests/run-c-tests.sh ;;
    c-tsan)  DISTLOCK_TEST_STAGES=tsan bash tests/run-c-tests.sh ;;
    c-valgrind) DISTLOCK_TEST_STAGES=valgrind bash tests/run-c-tests.sh ;;
    c-stack) DISTLOCK_TEST_STAGES=stack bash tests/run-c-tests.sh ;;
    install) build_shared && bash packaging/test-install.sh "$shared" ;;
    release) bash scripts/check-version.sh; local v=$?
             bash tests/check-reference.sh; local r=$?
             bash packaging/abi/check-abi.sh && python3 bench/check-results.py &&
               /usr/bin/python3 -m pytest -q -p no:cacheprovider bench/test_adapters_section.py &&
               [ $v -eq 0 ] && [ $r -eq 0 ] ;;
    fuzz)    bash tests/fuzz/run.sh ;;
    php)     build_shared && DISTLOCK_CORE_BUILD=$shared bash php-ext/tests/run.sh ;;
    pecl)    bash packaging/test-pecl.sh ;;
    php-adapters) build_shared && DISTLOCK_CORE_BUILD=$shared bash php-adapters/tests/run.sh ;;
    python)  bash python/tests/run.sh ;;
    python-quick) bash python/tests/run.sh --quick ;;
    pydist)  bash python/tests/dist.sh ;;
    cli)     build_shared && DISTLOCK_CLI=$shared/cli/distlock bash cli/tests/run.sh ;;
    demo)    bash scripts/demo.sh ;;
    docs)    build_shared && DISTLOCK_CORE_BUILD=$shared bash tests/check-doc-snippets.sh ;;
    deb)     bash packaging/test-debs.sh ;;
    *)       echo "unknown suite $1" >&2; return 2 ;;
  esac
}

results=$logs/results
: >"$results"
: >"$logs/build-shared.log"   # build_shared appends: several suites call it

# suite NAME: run it, its output in $logs/NAME.log, printed when it ends;
# its verdict and seconds appended to $results.
suite() {
  local s=$1 start verdict
  start=$(date +%s)
  if run_suite "$s" >"$logs/$s.log" 2>&1; then verdict=PASS; else verdict=FAIL; fi
  {
    echo
    echo "=================== suite: $s ==================="
    cat "$logs/$s.log"
    echo "=================== $s: $verdict ($(( $(date +%s) - start )) s) ==================="
  } | flock "$logs/.print" cat   # one suite's output at a time
  echo "$verdict $s $(( $(date +%s) - start ))" >>"$results"
}

# lane SUITE...: one after another
lane() { local s; for s in "$@"; do suite "$s"; done; }

t0=$(date +%s)
if [ $# -eq 0 ]; then
  lane c-asan python docs &
  l1=$!
  lane c-tsan demo &
  l2=$!
  lane c-valgrind cli &
  l3=$!
  lane c-stack release install fuzz pydist pecl php php-adapters &
  l4=$!
  wait $l1 $l2 $l3 $l4
  lane deb
elif [ "$1" = quick ] && [ $# -eq 1 ]; then
  lane c-quick &
  l1=$!
  lane cli &
  l2=$!
  lane python-quick php php-adapters docs &
  l3=$!
  wait $l1 $l2 $l3
else
  lane "$@"
fi

echo
passed=$(grep -c '^PASS' "$results"); failed=$(grep -c '^FAIL' "$results")
sed 's/^/  /; s/$/ s/' "$results"
[ "$failed" -gt 0 ] && echo "failed suites: $(awk '$1 == "FAIL" {print $2}' "$results" | tr '\n' ' ')"
echo "suites: $passed passed, $failed failed ($(( $(date +%s) - t0 )) s)"
[ "$failed" -eq 0 ]
