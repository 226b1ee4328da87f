#!/usr/bin/env bash
# Build and run the C test suite of the core library. Each configuration is
# built once; the stages pick their tests by CTest label (tests/CMakeLists.txt,
# distlock_test(... LABELS ...)):
#   asan      build-asan/ (-DDISTLOCK_SANITIZE=address,undefined): every test
#             once; DISTLOCK_TEST_QUICK=1 leaves out the ones labeled `slow`
#             (failovers, chaos)
#   tsan      build-tsan/ (-DDISTLOCK_SANITIZE=thread): the tests labeled `threads`
#   valgrind  build/ (RelWithDebInfo, the build the front ends use): the tests
#             labeled `valgrind`, under valgrind
#   stack     build-stack/ the library with GCC's call-graph info: every public
#             entry point under 4 KB of stack for 8 nodes (scripts/stack-usage.py)
#   normal    build/: every test without instrumentation (not in the default
#             set: the ASan+UBSan pass runs the same tests; for bisecting a
#             sanitizer-only failure or timing on a plain build)
# Every test binary starts and stops its own redis-servers (tests/harness).
# test_chaos (tests/chaos, ~50 s) is labeled slow; DISTLOCK_CHAOS_SECONDS
# (per configuration, default 24) lengthens or shortens it.
# Exits non-zero if anything fails.
#
# Environment:
#   DISTLOCK_TEST_BUILD_ROOT  where the build trees go (default: the repo top)
#   DISTLOCK_TEST_STAGES      subset of "normal asan tsan valgrind stack" to run
#                             (default "asan tsan valgrind stack")
#   DISTLOCK_TEST_QUICK       1: the asan stage leaves out the tests labeled slow
#   DISTLOCK_TEST_JOBS        ctest -j for the asan, tsan and normal stages (default
#                             2: the tests mostly wait on their redis-servers;
#                             the longest start first, by their COST in
#                             tests/CMakeLists.txt, then by ctest's measured times)
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=${DISTLOCK_TEST_BUILD_ROOT:-$top}
stages=${DISTLOCK_TEST_STAGES:-asan tsan valgrind stack}
quick=${DISTLOCK_TEST_QUICK:-0}
jobs=2
ctest_jobs=${DISTLOCK_TEST_JOBS:-2}
failed=()
summary=()

log() { printf '== %s\n' "$*"; }

# configure DIR CMAKE_ARGS... / build DIR TARGET...: one at a time per tree
# (DIR/.cmake.lock): scripts/test.sh builds build/ for the front ends while a stage
# may be building its tests there.
configure() {
  local dir=$1; shift
  mkdir -p "$dir"
  log "configure $dir $*"
  flock "$dir/.cmake.lock" cmake -S "$top" -B "$dir" -DDISTLOCK_BUILD_TESTS=ON "$@" \
    >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; return 1; }
}

build() {
  local dir=$1; shift
  log "build $dir (${*})"
  flock "$dir/.cmake.lock" cmake --build "$dir" -j"$jobs" --target "$@" >"$dir.build.log" 2>&1 \
    || { tail -n 60 "$dir.build.log"; return 1; }
}

# labeled DIR LABEL: the names of the tests with LABEL (each one's target is
# its name), from the configured tree's CTest files.
labeled() {
  (cd "$1/tests" && ctest -N -L "^$2\$") | sed -n 's/^ *Test *#[0-9]*: *//p'
}

run_stage() {
  local name=$1; shift
  local t0=$SECONDS
  if "$@"; then
    summary+=("PASS  $name ($((SECONDS - t0)) s)")
  else
    summary+=("FAIL  $name ($((SECONDS - t0)) s)")
    failed+=("$name")
  fi
}

mkdir -p "$root"

stage_normal() {
  local b=$root/build
  configure "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo || return 1
  build "$b" distlock_c_tests || return 1
  log "ctest $b/tests"
  (cd "$b/tests" && ctest --output-on-failure -j"$ctest_jobs")
}

stage_asan() {
  local b=$root/build-asan select=()
  [ "$quick" = 1 ] && select=(-LE '^slow$')
  configure "$b" -DCMAKE_BUILD_TYPE=Debug \
    -DDISTLOCK_SANITIZE=address,undefined -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF \
    || return 1
  build "$b" distlock_c_tests || return 1
  log "ctest $b/tests (ASan+UBSan) ${select[*]}"
  (cd "$b/tests" && \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    DISTLOCK_TEST_SLOW=1 ctest --output-on-failure -j"$ctest_jobs" "${select[@]}")
}

stage_tsan() {
  local b=$root/build-tsan tests
  configure "$b" -DCMAKE_BUILD_TYPE=Debug \
    -DDISTLOCK_SANITIZE=thread -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF || return 1
  mapfile -t tests < <(labeled "$b" threads)
  [ ${#tests[@]} -gt 0 ] || { echo "no test labeled threads"; return 1; }
  build "$b" "${tests[@]}" || return 1
  log "the ${#tests[@]} tests labeled threads, under ThreadSanitizer (ctest -j$ctest_jobs)"
  (cd "$b/tests" && \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    DISTLOCK_TEST_SLOW=1 DISTLOCK_TEST_ITERATIONS=60 \
    ctest --output-on-failure -j"$ctest_jobs" -L '^threads$')
}

stage_valgrind() {
  local b=$root/build rc=0 t tests
  configure "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo || return 1
  mapfile -t tests < <(labeled "$b" valgrind)
  [ ${#tests[@]} -gt 0 ] || { echo "no test labeled valgrind"; return 1; }
  build "$b" "${tests[@]}" || return 1
  for t in "${tests[@]}"; do
    local t0=$SECONDS
    log "valgrind $t"
    DISTLOCK_TEST_SLOW=1 valgrind -q --error-exitcode=1 --leak-check=full \
      --errors-for-leak-kinds=definite "$b/tests/$t" || rc=1
    log "valgrind $t: $((SECONDS - t0)) s"
  done
  return $rc
}

stage_stack() {
  local b=$root/build-stack
  mkdir -p "$b"
  log "configure $b"
  cmake -S "$top" -B "$b" -DDISTLOCK_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_C_FLAGS=-fstack-usage -fcallgraph-info=su" >"$b.configure.log" 2>&1 \
    || { cat "$b.configure.log"; return 1; }
  build "$b" distlock || return 1
  python3 "$top/scripts/stack-usage.py" "$b" --nodes 8 --limit 4096
}

for s in $stages; do
  case $s in
    normal) run_stage "ctest (normal build)" stage_normal ;;
    asan) run_stage "ctest (ASan+UBSan)$([ "$quick" = 1 ] && echo ', not slow')" stage_asan ;;
    tsan) run_stage "tests labeled threads (TSan)" stage_tsan ;;
    valgrind) run_stage "tests labeled valgrind (valgrind)" stage_valgrind ;;
    stack) run_stage "stack of every entry point < 4 KB (N = 8)" stage_stack ;;
    *) echo "run-c-tests.sh: unknown stage $s" >&2; exit 2 ;;
  esac
done

log "summary"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "C tests FAILED: ${failed[*]}"
  exit 1
fi
echo "C tests passed"
