#!/usr/bin/env bash
# Build and run the C test suite of the core library:
#   1. build/       normal build (RelWithDebInfo), ctest
#   2. build-asan/  -DDISTLOCK_SANITIZE=address,undefined, ctest
#   3. build-tsan/  -DDISTLOCK_SANITIZE=thread, the tests that use threads
#   4. valgrind over a few binaries of build/
#   5. build-stack/ the library with GCC's call-graph info: every public
#      entry point under 4 KB of stack for 8 nodes (scripts/stack-usage.py)
# Every test binary starts and stops its own redis-servers (tests/harness).
# test_chaos (tests/chaos, ~50 s) runs in stages 1 and 2; DISTLOCK_CHAOS_SECONDS
# (per configuration, default 24) lengthens or shortens it.
# Exits non-zero if anything fails.
#
# Environment:
#   DISTLOCK_TEST_BUILD_ROOT  where the build trees go (default: the repo top)
#   DISTLOCK_TEST_STAGES      subset of "normal asan tsan valgrind stack" to run
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=${DISTLOCK_TEST_BUILD_ROOT:-$top}
stages=${DISTLOCK_TEST_STAGES:-normal asan tsan valgrind stack}
jobs=2
failed=()
summary=()

log() { printf '== %s\n' "$*"; }

# configure_build DIR TARGET... -- CMAKE_ARGS...
configure_build() {
  local dir=$1; shift
  local targets=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do targets+=("$1"); shift; done
  shift
  log "configure $dir $*"
  cmake -S "$top" -B "$dir" -DDISTLOCK_BUILD_TESTS=ON "$@" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; return 1; }
  log "build $dir (${targets[*]})"
  cmake --build "$dir" -j"$jobs" --target "${targets[@]}" >"$dir.build.log" 2>&1 \
    || { tail -n 60 "$dir.build.log"; return 1; }
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
  mkdir -p "$b"
  configure_build "$b" distlock_c_tests -- -DCMAKE_BUILD_TYPE=RelWithDebInfo || return 1
  log "ctest $b/tests"
  (cd "$b/tests" && ctest --output-on-failure -j"$jobs")
}

stage_asan() {
  local b=$root/build-asan
  mkdir -p "$b"
  configure_build "$b" distlock_c_tests -- -DCMAKE_BUILD_TYPE=Debug \
    -DDISTLOCK_SANITIZE=address,undefined -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF \
    || return 1
  log "ctest $b/tests (ASan+UBSan)"
  (cd "$b/tests" && \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    DISTLOCK_TEST_SLOW=1 ctest --output-on-failure -j"$jobs")
}

stage_tsan() {
  local b=$root/build-tsan
  mkdir -p "$b"
  configure_build "$b" test_threads test_wait test_fair_handover test_cancel test_renew test_reentrant test_holder test_owner \
    test_review_a_renew test_review_a_lostcb test_lost_callback test_review_a_reentrant \
    test_review_a_wait test_review_a_password test_review_b_stale test_review_b_order test_review_b_dns \
    test_frozen_node test_tls test_sentinel test_sentinel_tls test_sentinel_redlock \
    test_wait_replicas test_stats test_cluster test_cluster_tls \
    test_stuck_connection test_acl_refusal test_cluster_tls_own_address test_cluster_address_churn \
    test_sentinel_tls_master_address test_cluster_release_wakes test_stuck_connection_replacement \
    test_cluster_waiter_shard_churn test_cluster_stale_after_migration test_cluster_stale_via_seed_address \
    -- -DCMAKE_BUILD_TYPE=Debug \
    -DDISTLOCK_SANITIZE=thread -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF || return 1
  log "threaded tests under ThreadSanitizer"
  (cd "$b/tests" && \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    DISTLOCK_TEST_SLOW=1 DISTLOCK_TEST_ITERATIONS=60 \
    ctest --output-on-failure -R \
      '^test_(threads|wait|fair_handover|cancel|renew|reentrant|holder|owner|review_a_(renew|lostcb|reentrant|wait|password)|lost_callback|review_b_(stale|order|dns)|frozen_node|tls|sentinel|sentinel_tls|sentinel_redlock|wait_replicas|stats|cluster|cluster_tls|stuck_connection|acl_refusal|cluster_tls_own_address|cluster_address_churn|sentinel_tls_master_address|cluster_release_wakes|stuck_connection_replacement|cluster_waiter_shard_churn|cluster_stale_after_migration|cluster_stale_via_seed_address)$')
}

stage_valgrind() {
  local b=$root/build
  [ -x "$b/tests/test_single" ] || configure_build "$b" distlock_c_tests -- \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo || return 1
  local rc=0 t
  # Not test_sentinel_tls: its fork case's child inherits the +switch-master
  # thread's OpenSSL per-thread state, which no code in the child can reach or
  # free, so valgrind counts it lost there (ASan and TSan run it).
  for t in test_single test_badinput test_cancel test_holder test_owner test_review_a_uri test_review_a_reentrant test_review_b_stale \
           test_review_b_resend test_frozen_node test_tls test_wait_replicas test_stats test_lost_callback \
           test_hostile_reply test_cluster test_cluster_tls test_stuck_connection test_masking \
           test_cluster_tls_own_address test_scan_string_keys test_cluster_stale_after_migration \
           test_cluster_stale_via_seed_address; do
    log "valgrind $t"
    DISTLOCK_TEST_SLOW=1 valgrind -q --error-exitcode=1 --leak-check=full \
      --errors-for-leak-kinds=definite "$b/tests/$t" || rc=1
  done
  return $rc
}

stage_stack() {
  local b=$root/build-stack
  mkdir -p "$b"
  configure_build "$b" distlock -- -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_C_FLAGS=-fstack-usage -fcallgraph-info=su" || return 1
  python3 "$top/scripts/stack-usage.py" "$b" --nodes 8 --limit 4096
}

for s in $stages; do
  case $s in
    normal) run_stage "ctest (normal build)" stage_normal ;;
    asan) run_stage "ctest (ASan+UBSan)" stage_asan ;;
    tsan) run_stage "threaded tests (TSan)" stage_tsan ;;
    valgrind) run_stage "valgrind (every test listed in stage_valgrind)" stage_valgrind ;;
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
