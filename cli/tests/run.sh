#!/usr/bin/env bash
# Tests of the distlock command against real, throwaway redis-servers.
#
#   bash cli/tests/run.sh [TEST_NAME...]
#
# Builds the CLI with cmake into $DISTLOCK_CLI_BUILD_DIR (default
# <repo>/build-cli; or tests the one DISTLOCK_CLI names), starts one redis-server plus a set of three (Redlock) on
# free ports with tests/harness/redis.sh, runs every t_* function below (or
# those named) in its own subshell, stops the servers, prints
# "N passed, M failed" and exits non-zero if M > 0.
#
# No sleep stands in for synchronization: holders announce themselves with a
# marker file and the tests wait for conditions in bounded loops. Children that
# sleep are workloads (a command that outlives the TTL).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${DISTLOCK_CLI_BUILD_DIR:-$REPO/build-cli}
HARNESS=$REPO/tests/harness/redis.sh

if [ -n "${DISTLOCK_CLI:-}" ]; then
  # A distlock already built (scripts/test.sh shares its build/): test that one.
  DL=$DISTLOCK_CLI
  echo "== testing $DL"
else
echo "== building the distlock command in $BUILD"
mkdir -p "$BUILD"
if ! cmake -S "$REPO" -B "$BUILD" -DDISTLOCK_BUILD_TESTS=OFF -DDISTLOCK_BUILD_CLI=ON \
       >"$BUILD/cli-build.log" 2>&1 ||
   ! cmake --build "$BUILD" -j"$(nproc 2>/dev/null || echo 2)" --target distlock_cli \
       >>"$BUILD/cli-build.log" 2>&1; then
  tail -40 "$BUILD/cli-build.log" >&2
  echo "0 passed, 1 failed (build)"
  exit 1
fi
DL=$BUILD/cli/distlock
fi
[ -x "$DL" ] || { echo "no $DL after the build" >&2; echo "0 passed, 1 failed (build)"; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/distlock-cli-tests.XXXXXX")
cleanup() {
  bash "$HARNESS" stop "$TMP/redis1" >/dev/null 2>&1 || true
  bash "$HARNESS" stop "$TMP/redis3" >/dev/null 2>&1 || true
  bash "$HARNESS" stop "$TMP/sentinel" >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT=$(bash "$HARNESS" start "$TMP/redis1" 1) || { echo "0 passed, 1 failed (redis)"; exit 1; }
bash "$HARNESS" start "$TMP/redis3" 3 >/dev/null || { echo "0 passed, 1 failed (redis)"; exit 1; }
URIS3=$(bash "$HARNESS" uris "$TMP/redis3")
export DISTLOCK_SERVERS=redis://127.0.0.1:$PORT
export REDIS_PORT=$PORT
echo "== redis-server on port $PORT; Redlock set $URIS3"

# ------------------------------------------------------------------ helpers
fail() { echo "    FAIL: $*" >&2; return 1; }
rcli() { redis-cli -p "$PORT" "$@"; }

# expect STATUS CMD...: run CMD, keep its stdout/stderr in $D/out $D/err.
expect() {
  local want=$1; shift
  local got=0
  "$@" >"$D/out" 2>"$D/err" || got=$?
  if [ "$got" != "$want" ]; then
    echo "    command: $*" >&2
    echo "    stdout: $(head -c 600 "$D/out")" >&2
    echo "    stderr: $(head -c 600 "$D/err")" >&2
    fail "exit status $got, expected $want"
    return 1
  fi
}
contains() { grep -q -- "$2" "$1" || fail "$1 does not contain '$2': $(head -c 400 "$1")"; }
absent() { [ ! -e "$1" ] || fail "$1 exists but must not"; }

# Bounded wait for a condition (a shell command), polling every 20 ms.
wait_until() {
  local secs=$1; shift
  local i
  for ((i = 0; i < secs * 50; i++)); do
    if eval "$*"; then return 0; fi
    sleep 0.02
  done
  fail "timed out after ${secs}s waiting for: $*"
}

alive() { # running and not a zombie
  local s
  s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$s" ] && [ "$s" != Z ]
}

# wait_exit PID SECS: bounded wait for a background job; its status in $ST.
wait_exit() {
  local pid=$1 secs=$2
  if ! wait_until "$secs" "! alive $pid"; then
    kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    return 1
  fi
  ST=0; wait "$pid" || ST=$?
}

track() { echo "$1" >>"$D/pids"; }

# hold KEY [distlock options]: a background `distlock run` whose command
# writes its token to $D/ready, then runs until $D/release exists and exits
# with the status in $D/release (empty: 0). Sets HOLDER.
hold() {
  local key=$1; shift
  "$DL" run "$@" "$key" -- sh -c '
    echo "$DISTLOCK_TOKEN" > "$0/ready.tmp" && mv "$0/ready.tmp" "$0/ready"
    while [ ! -e "$0/release" ]; do sleep 0.02; done
    exit $(cat "$0/release" 2>/dev/null || echo 0)' "$D" 2>"$D/holder.err" &
  HOLDER=$!
  track "$HOLDER"
  wait_until 10 "[ -s '$D/ready' ]" || { cat "$D/holder.err" >&2; return 1; }
}

# on_nodes KEY TOKEN PORTS: how many of the servers at PORTS hold TOKEN at KEY.
on_nodes() {
  local p n=0
  for p in $3; do [ "$(redis-cli -p "$p" get "$1")" = "$2" ] && n=$((n + 1)); done
  echo "$n"
}

# hold_on_every_node KEY PORTS [distlock options]: hold (above) until the
# token is on every server of PORTS, for a test that checks each node. A
# grant promises a quorum only: a fresh process's round may end at the
# quorum before its connection to the last node is ready, and that request
# is then never sent. So a try on a quorum but not everywhere is released and
# made again (a new process, new connections); a try on fewer fails.
hold_on_every_node() {
  local key=$1 ports=$2 n all deadline
  shift 2
  all=$(echo $ports | wc -w)
  deadline=$(($(date +%s) + 20))
  while :; do
    rm -f "$D/ready" "$D/release"
    hold "$key" "$@" || return 1
    n=$(on_nodes "$key" "$(cat "$D/ready")" "$ports")
    [ "$n" -ge $((all / 2 + 1)) ] || fail "a grant on $n of $all nodes, under the quorum" || return 1
    # The grant returned once a quorum granted: the last node's may still be
    # on its way. Polled for 3 s (by the clock: on a loaded machine 150
    # polls took the whole 20 s, leaving no second try) before it is taken
    # for unsent.
    local until=$(($(date +%s%N) + 3000000000))
    while [ "$n" != "$all" ] && [ "$(date +%s%N)" -lt "$until" ]; do
      sleep 0.02
      n=$(on_nodes "$key" "$(cat "$D/ready")" "$ports")
    done
    [ "$n" = "$all" ] && return 0
    touch "$D/release"
    wait_exit "$HOLDER" 10 || return 1
    [ "$ST" = 0 ] || fail "holder exit $ST: $(cat "$D/holder.err")" || return 1
    [ "$(date +%s)" -lt "$deadline" ] || fail "never on all $all nodes (last try: $n)" || return 1
    echo "    held on $n of $all nodes: again, with new connections" >&2
  done
}

# Let everything a test started end: release holders (every command loop
# of these tests ends when $D/release exists), then kill stragglers and
# their children by pid.
test_cleanup() {
  touch "$D/release"
  [ -n "${FP_W:-}" ] && exec {FP_W}>&-   # the fault proxy exits at EOF on its stdin
  [ -d "$D/redis" ] && bash "$HARNESS" stop "$D/redis" >/dev/null 2>&1
  [ -d "$D/cluster" ] && bash "$HARNESS" stop "$D/cluster" >/dev/null 2>&1
  [ -n "${STOPPED_PID:-}" ] && kill -CONT "$STOPPED_PID" 2>/dev/null
  if [ -f "$D/pids" ]; then
    local p c
    while read -r p; do
      for _ in $(seq 1 100); do alive "$p" || break; sleep 0.02; done
      # (children from /proc: procps may not be installed)
      for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do kill -9 "$c" 2>/dev/null || true; done
      kill -9 "$p" 2>/dev/null || true
    done <"$D/pids"
  fi
}

# start_proxy: tests/harness/faultproxy.py in front of the three Redlock
# servers (listener L -> server L), its stdin a FIFO we hold open (it exits at
# EOF: test_cleanup closes it). Sets FP_CTL (control port) and FP_PORTS.
start_proxy() {
  local targets=() p ready
  for p in $(echo "$URIS3" | tr ',' '\n' | sed 's/.*://'); do
    redis-cli -p "$p" flushall >/dev/null
    targets+=(--target "127.0.0.1:$p")
  done
  mkfifo "$D/fp.in"
  python3 "$REPO/tests/harness/faultproxy.py" "${targets[@]}" <"$D/fp.in" >"$D/fp.out" &
  track $!
  exec {FP_W}>"$D/fp.in"
  wait_until 15 "grep -q '^ready ' '$D/fp.out'" || return 1
  ready=$(head -1 "$D/fp.out")
  FP_CTL=${ready#*control=}; FP_CTL=${FP_CTL%% *}
  FP_PORTS=(${ready#*listen=}); FP_PORTS=(${FP_PORTS//,/ })
}
# proxy_uris L...: the server list over those listeners.
proxy_uris() {
  local l out=""
  for l in "$@"; do out="${out:+$out,}redis://127.0.0.1:${FP_PORTS[$l]}"; done
  echo "$out"
}
fpctl() {
  python3 "$REPO/tests/harness/faultproxy.py" ctl "$FP_CTL" "$*" >/dev/null || fail "faultproxy: $*"
}
# The message of a failure that is not "held" must not say it is.
not_held() {
  ! grep -qiE "another owner|is locked|held by" "$1" || fail "$1 speaks of a holder: $(head -c 400 "$1")"
}
# ms since $1 (date +%s%N)
since_ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# ------------------------------------------------------------------ tests

t_help_and_version() {
  expect 0 "$DL" --help && contains "$D/out" "Usage: distlock run" || return 1
  expect 0 "$DL" help run && contains "$D/out" "Usage: distlock run" || return 1
  local v
  for v in run status release list; do
    expect 0 "$DL" "$v" --help && contains "$D/out" "Usage: distlock $v" || return 1
    expect 0 "$DL" help "$v" || return 1
  done
  expect 0 "$DL" run --help && contains "$D/out" "conflict-exit-code" || return 1
  expect 0 "$DL" --version && contains "$D/out" "^distlock [0-9]" || return 1
}

t_bad_arguments() {
  local ran=$D/ran
  expect 64 "$DL" && contains "$D/err" "missing verb" || return 1
  expect 64 "$DL" frobnicate && contains "$D/err" "unknown verb" || return 1
  expect 64 "$DL" run || return 1
  expect 64 "$DL" run k:bad && contains "$D/err" "missing COMMAND" || return 1
  expect 64 "$DL" run k:bad -- && contains "$D/err" "missing COMMAND" || return 1
  expect 64 "$DL" run "" -- touch "$ran" && contains "$D/err" "KEY is empty" || return 1
  local bad
  for bad in "--ttl abc" "--ttl 0" "--ttl 597h" "--ttl 600h" "--ttl -5" "--ttl 5parsecs" "--ttl 0x10" "--wait soon" \
             "-E 256" "-E -1" "--lost-exit-code x" "--kill-signal FOO" "--timeout 0" \
             "--connect-timeout nope" "--bogus"; do
    # shellcheck disable=SC2086
    expect 64 "$DL" run $bad k:bad -- touch "$ran" || return 1
    contains "$D/err" "Try 'distlock run --help'" || return 1
  done
  expect 64 "$DL" run --ttl || return 1
  # Options go before KEY; one after KEY is refused with a hint, not run.
  expect 64 "$DL" run k:bad --ttl 5 -- touch "$ran" && contains "$D/err" "options go before KEY" || return 1
  expect 64 "$DL" run k:bad -- -x && contains "$D/err" "options go before KEY" || return 1
  expect 64 "$DL" run --servers 'nonsense://x' k:bad -- touch "$ran" || return 1
  expect 64 "$DL" run --servers '' k:bad -- touch "$ran" || return 1
  DISTLOCK_SERVERS='redis://127.0.0.1:notaport' expect 64 "$DL" run k:bad -- touch "$ran" || return 1
  expect 64 "$DL" run "$(head -c 2000 /dev/zero | tr '\0' k)" -- touch "$ran" || return 1
  expect 64 "$DL" status || return 1
  expect 64 "$DL" status a b || return 1
  expect 64 "$DL" release k:bad && contains "$D/err" "--force" || return 1
  expect 64 "$DL" release --force --token t k:bad || return 1
  expect 64 "$DL" help nosuchverb || return 1
  absent "$ran"
}

# --ttl follows the library's one TTL rule (distlock_ttl_from_seconds):
# rounded up to whole ms, 1 ms .. DISTLOCK_TTL_MAX, else 64 naming the value.
t_ttl_rule() {
  local k=cli:ttl:$RANDOM
  # 0.0001 s is 1 ms (up, not down to 0): it reaches the library, which then
  # refuses a lease not above its clock-drift allowance.
  expect 64 "$DL" run --ttl 0.0001 "$k" -- touch "$D/ran" || return 1
  contains "$D/err" "ttl_ms 1 is not above the clock-drift allowance" || return 1
  expect 64 "$DL" run --ttl 0.5ms "$k" -- touch "$D/ran" || return 1
  contains "$D/err" "ttl_ms 1 is not above" || return 1
  # 1.0005 s is 1001 ms; the lease on the server is no longer than that.
  expect 0 "$DL" run -v --ttl 1.0005 "$k" -- sh -c 'redis-cli -p "$REDIS_PORT" pttl "$DISTLOCK_KEY" > "$0/pttl"' "$D" || return 1
  contains "$D/err" "ttl 1.001s" || return 1
  local pttl; pttl=$(cat "$D/pttl")
  [ "$pttl" -gt 500 ] && [ "$pttl" -le 1001 ] || fail "pttl $pttl with --ttl 1.0005" || return 1
  # The largest lease is accepted; above it, and 0, are refused by value.
  expect 0 "$DL" run --ttl 2147483.647 "$k" -- sh -c 'redis-cli -p "$REDIS_PORT" pttl "$DISTLOCK_KEY" > "$0/pttl"' "$D" || return 1
  [ "$(cat "$D/pttl")" -gt 2147000000 ] || fail "pttl $(cat "$D/pttl") with the largest ttl" || return 1
  expect 64 "$DL" run --ttl 2147483.648 "$k" -- touch "$D/ran" || return 1
  contains "$D/err" "invalid --ttl '2147483.648' (ttl must be at most 2147483.647 seconds" || return 1
  expect 64 "$DL" run --ttl 0ms "$k" -- touch "$D/ran" || return 1
  contains "$D/err" "invalid --ttl '0ms' (ttl must be a finite number of seconds > 0, got 0)" || return 1
  absent "$D/ran"
}

t_exit_status_is_the_commands() {
  local k=cli:exit:$RANDOM
  expect 0 "$DL" run "$k" -- true || return 1
  expect 1 "$DL" run "$k" -- false || return 1
  expect 7 "$DL" run "$k" -- sh -c 'exit 7' || return 1
  expect 255 "$DL" run "$k" -- sh -c 'exit 255' || return 1
  # Without '--' too; the command's options are its own.
  expect 3 "$DL" run "$k" sh -c 'exit 3' || return 1
  expect 0 "$DL" run "$k" ls -d / && contains "$D/out" "^/$" || return 1
  # Killed by a signal: 128 + N, like a shell.
  expect 137 "$DL" run "$k" -- sh -c 'kill -KILL $$' || return 1
  expect 143 "$DL" run "$k" -- sh -c 'kill -TERM $$' || return 1
  expect 127 "$DL" run "$k" -- /nonexistent/command && contains "$D/err" "cannot run" || return 1
  expect 127 "$DL" run "$k" -- no-such-command-distlock-test || return 1
  printf 'echo hi\n' >"$D/noexec"; chmod 644 "$D/noexec"
  expect 126 "$DL" run "$k" -- "$D/noexec" && contains "$D/err" "Permission denied" || return 1
  # stdout and stdin pass through.
  expect 0 "$DL" run "$k" -- echo hello && contains "$D/out" "^hello$" || return 1
  [ "$(echo piped | "$DL" run "$k" -- cat)" = piped ] || fail "stdin not passed through"
  [ "$(rcli exists "$k")" = 0 ] || fail "key left behind"
}

t_holds_the_key_and_releases_on_exit() {
  local k=cli:hold:$RANDOM
  expect 0 "$DL" run "$k" -- sh -c 'echo "$DISTLOCK_KEY" > "$0/key"; echo "$DISTLOCK_TOKEN" > "$0/token"; redis-cli -p "$REDIS_PORT" get "$DISTLOCK_KEY" > "$0/seen"; redis-cli -p "$REDIS_PORT" pttl "$DISTLOCK_KEY" > "$0/pttl"' "$D" || return 1
  [ "$(cat "$D/key")" = "$k" ] || fail "DISTLOCK_KEY is '$(cat "$D/key")'"
  grep -Eq '^[0-9a-f]{32}$' "$D/token" || fail "DISTLOCK_TOKEN is '$(cat "$D/token")'"
  cmp -s "$D/token" "$D/seen" || fail "redis holds '$(cat "$D/seen")', not the command's token"
  local pttl; pttl=$(cat "$D/pttl")
  [ "$pttl" -gt 20000 ] && [ "$pttl" -le 30000 ] || fail "pttl $pttl with the default ttl 30s"
  [ "$(rcli exists "$k")" = 0 ] || fail "not released after the command exited"
  # --ttl sets the lease.
  expect 0 "$DL" run --ttl 5s "$k" -- sh -c 'redis-cli -p "$REDIS_PORT" pttl "$DISTLOCK_KEY" > "$0/pttl"' "$D" || return 1
  pttl=$(cat "$D/pttl"); [ "$pttl" -gt 3000 ] && [ "$pttl" -le 5000 ] || fail "pttl $pttl with --ttl 5s"
  expect 0 "$DL" run --ttl 1500ms "$k" -- sh -c 'redis-cli -p "$REDIS_PORT" pttl "$DISTLOCK_KEY" > "$0/pttl"' "$D" || return 1
  pttl=$(cat "$D/pttl"); [ "$pttl" -gt 500 ] && [ "$pttl" -le 1500 ] || fail "pttl $pttl with --ttl 1500ms"
  # Released after a failing command too.
  expect 9 "$DL" run "$k" -- sh -c 'exit 9' || return 1
  [ "$(rcli exists "$k")" = 0 ] || fail "not released after a failing command"
}

# The command's open descriptors, one number a line, into $1/fds.$2 (the
# numbers only: the directory handle the listing itself uses is at the
# lowest free number, the same with and without distlock unless one leaks),
# and `ls -l` of them into $1/fdl.$2 for the failure message.
# (No pipeline: the shell's pipe ends would be listed, or not, by timing.)
LIST_FDS='for f in /proc/$$/fd/*; do echo "${f##*/}"; done > "$0/fds.$1"; ls -l /proc/$$/fd > "$0/fdl.$1"'

# same_fds NAME: the command run by distlock (fds.NAME) has exactly the
# descriptors of the same command run without it (fds.plain).
same_fds() {
  cmp -s "$D/fds.plain" "$D/fds.$1" && return 0
  echo "    without distlock: $(tr '\n' ' ' <"$D/fds.plain")" >&2
  echo "    under distlock ($1): $(tr '\n' ' ' <"$D/fds.$1")" >&2
  sed 's/^/      /' "$D/fdl.$1" >&2
  fail "descriptors of distlock leaked into the command ($1)"
}

t_descriptors() {
  local k=cli:fds:$RANDOM
  # The caller's descriptors reach the command (like flock); none of the
  # library's (sockets, the subscriber's pipe, the lost eventfd) nor of
  # distlock's own (signalfd, exec pipe) do: the command has exactly the
  # descriptors it would have without distlock.
  expect 0 "$DL" run "$k" -- sh -c 'echo seven >&7' 7>"$D/fd7" || return 1
  [ "$(cat "$D/fd7")" = seven ] || fail "fd 7 not passed to the command" || return 1
  sh -c "$LIST_FDS" "$D" plain 7>"$D/fd7" || return 1
  grep -qx 7 "$D/fds.plain" || fail "no fd 7 in the plain listing: $(cat "$D/fds.plain")" || return 1
  expect 0 "$DL" run "$k" -- sh -c "$LIST_FDS" "$D" simple 7>"$D/fd7" || return 1
  same_fds simple || return 1
  # A lock that waited (the subscriber thread and its connection and pipe)
  # on 3 nodes, auto-renewed (the renewal thread and the lost eventfd).
  hold "$k" --servers "$URIS3" || return 1
  "$DL" run -v --servers "$URIS3" --ttl 1s --wait 20s "$k" -- sh -c "$LIST_FDS" "$D" waited \
    7>"$D/fd7" 2>"$D/waiter.err" &
  local waiter=$!; track "$waiter"
  wait_until 10 "grep -q 'waiting up to' '$D/waiter.err' 2>/dev/null" || return 1
  touch "$D/release"
  wait_exit "$waiter" 20 || return 1
  [ "$ST" = 0 ] || fail "waiter exit $ST: $(cat "$D/waiter.err")" || return 1
  contains "$D/waiter.err" "renewed every" || return 1
  same_fds waited || return 1
  wait_exit "$HOLDER" 10
}

t_conflict_is_refused() {
  local k=cli:conflict:$RANDOM
  hold "$k" || return 1
  expect 75 "$DL" run "$k" -- touch "$D/ran" || return 1
  contains "$D/err" "locked by another owner" || return 1
  contains "$D/err" "expires in" || return 1
  absent "$D/ran" || return 1
  expect 3 "$DL" run -E 3 "$k" -- touch "$D/ran" || return 1
  expect 0 "$DL" run --conflict-exit-code 0 "$k" -- touch "$D/ran" || return 1
  absent "$D/ran" || return 1
  expect 75 "$DL" run -q "$k" -- touch "$D/ran" || return 1
  [ ! -s "$D/err" ] || fail "-q printed: $(cat "$D/err")"
  # The holder still owns it, with its own token.
  [ "$(rcli get "$k")" = "$(cat "$D/ready")" ] || fail "holder's token replaced"
  echo 5 >"$D/release"
  wait_exit "$HOLDER" 10 || return 1
  [ "$ST" = 5 ] || fail "holder exited $ST, expected its command's 5"
  [ "$(rcli exists "$k")" = 0 ] || fail "not released after the holder's command exited"
  expect 0 "$DL" run "$k" -- touch "$D/ran" || return 1
  [ -e "$D/ran" ] || fail "command did not run once the key was free"
}

t_wait_gets_the_lock_after_release() {
  local k=cli:wait:$RANDOM
  hold "$k" || return 1
  "$DL" run -v --wait 20s "$k" -- sh -c 'date +%s%N > "$0/got"' "$D" 2>"$D/waiter.err" &
  local waiter=$!; track "$waiter"
  wait_until 10 "grep -q 'waiting up to' '$D/waiter.err' 2>/dev/null" || return 1
  absent "$D/got" || return 1
  alive "$waiter" || fail "waiter gave up"
  local t_rel; t_rel=$(date +%s%N)
  touch "$D/release"
  wait_exit "$waiter" 20 || return 1
  [ "$ST" = 0 ] || { cat "$D/waiter.err" >&2; fail "waiter exited $ST"; } || return 1
  local lat=$(( ($(cat "$D/got") - t_rel) / 1000000 ))
  echo "    waiter ran ${lat} ms after the holder was told to release" >&2
  # The holder's child polls its release file every 20 ms; the waiter must
  # not take the full --wait (20 s) nor anywhere near it.
  [ "$lat" -lt 3000 ] || fail "waiter took ${lat} ms after the release"
  wait_exit "$HOLDER" 10 || return 1
}

t_wait_times_out() {
  local k=cli:waitout:$RANDOM
  hold "$k" || return 1
  local t0 t1
  t0=$(date +%s%N)
  expect 75 "$DL" run --wait 700ms "$k" -- touch "$D/ran" || return 1
  t1=$(date +%s%N)
  local ms=$(( (t1 - t0) / 1000000 ))
  [ "$ms" -ge 700 ] || fail "gave up after ${ms} ms < --wait 700ms"
  [ "$ms" -lt 5000 ] || fail "gave up only after ${ms} ms with --wait 700ms"
  contains "$D/err" "gave up after waiting" || return 1
  absent "$D/ran"
}

t_renewal_outlives_the_ttl() {
  local k=cli:renew:$RANDOM
  # TTL 1s, renewed every ~333 ms; the command works for 3 s (3 TTLs).
  "$DL" run --ttl 1s "$k" -- sh -c '
    echo "$DISTLOCK_TOKEN" > "$0/token"
    sleep 3
    redis-cli -p "$REDIS_PORT" get "$DISTLOCK_KEY" > "$0/after"
    redis-cli -p "$REDIS_PORT" pttl "$DISTLOCK_KEY" > "$0/pttl"' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -s '$D/token' ]" || return 1
  # After more than one TTL the key must still be ours (renewed).
  local tok; tok=$(cat "$D/token")
  wait_until 10 "[ -s '$D/after' ]" || return 1
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 0 ] || fail "exit $ST: $(cat "$D/run.err")" || return 1
  [ "$(cat "$D/after")" = "$tok" ] || fail "after 3 TTLs redis holds '$(cat "$D/after")', not '$tok'"
  local pttl; pttl=$(cat "$D/pttl")
  [ "$pttl" -gt 0 ] && [ "$pttl" -le 1000 ] || fail "pttl $pttl after 3 TTLs"
  ! grep -q "lost" "$D/run.err" || fail "reported a loss: $(cat "$D/run.err")"
  [ "$(rcli exists "$k")" = 0 ] || fail "not released"
}

t_renewal_keeps_others_out() {
  local k=cli:renew2:$RANDOM
  hold "$k" --ttl 600ms || return 1
  # While the holder's command outlives several TTLs, others stay refused.
  local i
  for i in 1 2 3 4; do
    expect 75 "$DL" run "$k" -- touch "$D/ran" || return 1
    sleep 0.4   # workload pacing: 4 x 0.4 s spans 2.7 TTLs
  done
  absent "$D/ran" || return 1
  [ "$(rcli get "$k")" = "$(cat "$D/ready")" ] || fail "token changed"
  touch "$D/release"
  wait_exit "$HOLDER" 10 && [ "$ST" = 0 ] || fail "holder exit ${ST:-?}: $(cat "$D/holder.err")"
}

t_signals_are_forwarded() {
  local k=cli:sig:$RANDOM
  # TERM reaches the command; distlock exits with the command's status.
  "$DL" run "$k" -- sh -c 'trap "echo TERM > \"$0/got\"; exit 3" TERM; touch "$0/ready"; while [ ! -e "$0/release" ]; do sleep 0.02; done' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -e '$D/ready' ]" || return 1
  kill -TERM "$pid"
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 3 ] || fail "exit $ST, expected the command's 3" || return 1
  [ "$(cat "$D/got" 2>/dev/null)" = TERM ] || fail "command did not see SIGTERM" || return 1
  [ "$(rcli exists "$k")" = 0 ] || fail "not released after the command exited" || return 1

  # INT (not ignored: a background job of a script has SIGINT ignored, so
  # reset it as a terminal would have it): the command dies of it -> 130.
  rm -f "$D/ready"
  env --default-signal=INT "$DL" run "$k" -- sh -c 'touch "$0/ready"; exec sleep 30' "$D" 2>"$D/run.err" &
  pid=$!; track "$pid"
  wait_until 10 "[ -e '$D/ready' ]" || return 1
  kill -INT "$pid"
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 130 ] || fail "exit $ST after SIGINT, expected 130" || return 1
  [ "$(rcli exists "$k")" = 0 ] || fail "not released after SIGINT" || return 1

  # HUP, USR1 forwarded to a command that handles them and goes on. (Their
  # default action restored first, as for INT above: under nohup HUP is
  # ignored, the command's sh may not trap a signal ignored at its start,
  # and distlock rightly forwards none it found ignored.)
  rm -f "$D/ready"
  env --default-signal=HUP,USR1 "$DL" run -v "$k" -- sh -c 'trap "echo HUP >> \"$0/sigs\"" HUP; trap "echo USR1 >> \"$0/sigs\"" USR1; touch "$0/ready"; while [ ! -e "$0/release" ]; do sleep 0.02; done' "$D" 2>"$D/run.err" &
  pid=$!; track "$pid"
  wait_until 10 "[ -e '$D/ready' ]" || return 1
  kill -HUP "$pid"
  wait_until 10 "grep -q HUP '$D/sigs' 2>/dev/null" || return 1
  kill -USR1 "$pid"
  wait_until 10 "grep -q USR1 '$D/sigs' 2>/dev/null" || return 1
  [ "$(rcli exists "$k")" = 1 ] || fail "lock not held while the command goes on" || return 1
  touch "$D/release"
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 0 ] || fail "exit $ST" || return 1
  [ "$(rcli exists "$k")" = 0 ] || fail "not released"
}

t_lock_held_until_command_exits_despite_term() {
  local k=cli:sigign:$RANDOM
  # A command that ignores TERM: distlock forwards it and keeps the lock
  # (renewing it) until the command really exits.
  "$DL" run -v --ttl 1s "$k" -- sh -c 'trap "" TERM; touch "$0/ready"; while [ ! -e "$0/release" ]; do sleep 0.02; done; exit 6' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -e '$D/ready' ]" || return 1
  kill -TERM "$pid"
  wait_until 10 "grep -q 'forwarding' '$D/run.err'" || return 1
  sleep 1.5   # workload: more than one TTL passes
  alive "$pid" || fail "distlock exited although the command still runs" || return 1
  expect 75 "$DL" run "$k" -- true || return 1
  touch "$D/release"
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 6 ] || fail "exit $ST, expected 6" || return 1
  [ "$(rcli exists "$k")" = 0 ] || fail "not released"
}

t_signal_while_waiting() {
  local k=cli:sigwait:$RANDOM
  hold "$k" || return 1
  "$DL" run -v --wait forever "$k" -- touch "$D/ran" 2>"$D/waiter.err" &
  local w=$!; track "$w"
  wait_until 10 "grep -q 'waiting for it' '$D/waiter.err' 2>/dev/null" || return 1
  kill -TERM "$w"
  wait_exit "$w" 5 || return 1
  [ "$ST" = 143 ] || fail "waiter exit $ST after SIGTERM, expected 143" || return 1
  absent "$D/ran" || return 1
  [ "$(rcli get "$k")" = "$(cat "$D/ready")" ] || fail "holder's lock disturbed"
}

t_sigint_while_waiting() {
  local k=cli:intwait:$RANDOM
  hold "$k" || return 1
  # SIGINT as a terminal would have it (a background job of a script has it
  # ignored): the wait ends at once, 130, the command never runs.
  env --default-signal=INT "$DL" run -v --wait forever "$k" -- touch "$D/ran" 2>"$D/waiter.err" &
  local w=$!; track "$w"
  wait_until 10 "grep -q 'waiting for it' '$D/waiter.err' 2>/dev/null" || return 1
  # In its wait: its subscription shows up on the server.
  wait_until 10 "[ \"\$(rcli pubsub numsub 'distlock:$k' | tail -n 1)\" -ge 1 ]" || return 1
  local t0; t0=$(date +%s%N)
  kill -INT "$w"
  wait_exit "$w" 5 || return 1
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "    waiter exited ${ms} ms after SIGINT (measured in 20 ms polls)" >&2
  [ "$ST" = 130 ] || fail "waiter exit $ST after SIGINT, expected 130: $(cat "$D/waiter.err")" || return 1
  [ "$ms" -lt 1000 ] || fail "waiter took ${ms} ms to exit after SIGINT" || return 1
  contains "$D/waiter.err" "while waiting for" || return 1
  absent "$D/ran" || return 1
  [ "$(rcli get "$k")" = "$(cat "$D/ready")" ] || fail "holder's lock disturbed" || return 1
  wait_until 5 "[ \"\$(rcli pubsub numsub 'distlock:$k' | tail -n 1)\" = 0 ]" || return 1
  touch "$D/release"
  wait_exit "$HOLDER" 10 && [ "$ST" = 0 ] || fail "holder exit ${ST:-?}"
}

t_lost_lock_is_reported() {
  local k=cli:lost:$RANDOM
  # --on-lost=ignore: reported, the command goes on, its status is kept.
  hold "$k" --ttl 1s --on-lost=ignore || return 1
  expect 0 "$DL" release --force "$k" || return 1
  wait_until 10 "grep -q 'lost the lock' '$D/holder.err'" || return 1
  contains "$D/holder.err" "WITHOUT the lock" || return 1
  alive "$HOLDER" || fail "holder stopped with --on-lost=ignore" || return 1
  echo 4 >"$D/release"
  wait_exit "$HOLDER" 10 || return 1
  [ "$ST" = 4 ] || fail "exit $ST, expected the command's 4"
}

t_lost_lock_kills_with_option() {
  local k=cli:lostkill:$RANDOM
  "$DL" run --ttl 1s --kill-on-lost "$k" -- sh -c 'touch "$0/ready"; while [ ! -e "$0/release" ]; do sleep 0.02; done' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -e '$D/ready' ]" || return 1
  # Someone else takes the key over (as after an expiry).
  rcli set "$k" intruder >/dev/null
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 79 ] || fail "exit $ST, expected 79: $(cat "$D/run.err")" || return 1
  contains "$D/run.err" "lost the lock" || return 1
  [ "$(rcli get "$k")" = intruder ] || fail "the new owner's key was touched" || return 1
  rcli del "$k" >/dev/null

  # --lost-exit-code and --kill-signal; a command ignoring TERM gets KILL
  # after --kill-after.
  rm -f "$D/ready"
  "$DL" run --ttl 1s -k --lost-exit-code 9 --kill-after 300ms "$k" -- sh -c 'trap "" TERM; touch "$0/ready"; while [ ! -e "$0/release" ]; do sleep 0.02; done' "$D" 2>"$D/run.err" &
  pid=$!; track "$pid"
  wait_until 10 "[ -e '$D/ready' ]" || return 1
  rcli del "$k" >/dev/null
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 9 ] || fail "exit $ST, expected 9: $(cat "$D/run.err")" || return 1
  contains "$D/run.err" "SIGKILL" || return 1
  rm -f "$D/ready"
  env --default-signal=INT "$DL" run --ttl 1s -k --kill-signal INT "$k" -- sh -c 'trap "echo INT > \"$0/got\"; exit 0" INT; touch "$0/ready"; while [ ! -e "$0/release" ]; do sleep 0.02; done' "$D" 2>"$D/run.err" &
  pid=$!; track "$pid"
  wait_until 10 "[ -e '$D/ready' ]" || return 1
  rcli del "$k" >/dev/null
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 79 ] || fail "exit $ST, expected 79" || return 1
  [ "$(cat "$D/got" 2>/dev/null)" = INT ] || fail "command did not get SIGINT"
}

# --on-lost: term sends SIGTERM, then SIGKILL once --grace has
# passed; kill sends SIGKILL at once; ignore lets the command run on. The
# lease is lost for real: the key is deleted under the running command and
# the renewal finds it gone.
t_on_lost_term_then_kill_after_grace() {
  local k=cli:onlost:$RANDOM
  # The command records when SIGTERM arrives and ignores it; it writes its pid.
  "$DL" run -v --ttl 1s --on-lost=term --grace=2s "$k" -- sh -c '
    trap "date +%s%N > \"$0/term\"" TERM
    echo $$ > "$0/pid.tmp" && mv "$0/pid.tmp" "$0/pid"
    while [ ! -e "$0/release" ]; do sleep 0.02; done' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -s '$D/pid' ]" || return 1
  local child; child=$(cat "$D/pid")
  rcli del "$k" >/dev/null
  wait_until 10 "[ -s '$D/term' ]" || return 1
  # Still alive right after SIGTERM: SIGKILL waits for the grace.
  alive "$child" || fail "the command died at once; --grace not honoured" || return 1
  wait_until 10 "! alive $child" || return 1
  local ms=$(( ($(date +%s%N) - $(cat "$D/term")) / 1000000 ))
  echo "    SIGKILL came ${ms} ms after SIGTERM (--grace=2s; seen in 20 ms polls)" >&2
  # The trap's stamp comes after the signal (sh runs it once its current
  # `sleep 0.02` ends, then forks date): up to a few hundred ms late on a
  # loaded machine, so the bound below the grace allows 500 ms of it.
  [ "$ms" -ge 1500 ] || fail "killed ${ms} ms after SIGTERM, before the 2s grace" || return 1
  [ "$ms" -le 6000 ] || fail "killed only ${ms} ms after SIGTERM" || return 1
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 79 ] || fail "exit $ST, expected 79: $(cat "$D/run.err")" || return 1
  contains "$D/run.err" "stopping the command (pid $child): Terminated now, SIGKILL after 2.000s (--on-lost=term)" || return 1
  contains "$D/run.err" "(--grace); sending SIGKILL" || return 1
  contains "$D/run.err" "was killed by Killed" || return 1
  [ "$(rcli exists "$k")" = 0 ] || fail "a key was left" || return 1
}

t_on_lost_kill_and_ignore() {
  local k=cli:onlostk:$RANDOM
  # kill: SIGKILL at once, even for a command that ignores TERM; exit 79.
  "$DL" run -v --ttl 1s --on-lost kill "$k" -- sh -c '
    trap "" TERM; echo $$ > "$0/pid.tmp" && mv "$0/pid.tmp" "$0/pid"
    while [ ! -e "$0/release" ]; do sleep 0.02; done' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -s '$D/pid' ]" || return 1
  rcli set "$k" intruder >/dev/null
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 79 ] || fail "exit $ST, expected 79: $(cat "$D/run.err")" || return 1
  contains "$D/run.err" "): SIGKILL now (--on-lost=kill)" || return 1
  contains "$D/run.err" "was killed by Killed" || return 1
  [ "$(rcli get "$k")" = intruder ] || fail "the new owner's key was touched" || return 1
  rcli del "$k" >/dev/null
  # ignore: the loss is said, the command runs on past it and its status is kept.
  rm -f "$D/pid"
  "$DL" run --ttl 1s --on-lost=ignore "$k" -- sh -c '
    echo $$ > "$0/pid.tmp" && mv "$0/pid.tmp" "$0/pid"
    while [ ! -e "$0/release" ]; do sleep 0.02; done
    touch "$0/ran-on"; exit 4' "$D" 2>"$D/run.err" &
  pid=$!; track "$pid"
  wait_until 10 "[ -s '$D/pid' ]" || return 1
  rcli del "$k" >/dev/null
  wait_until 10 "grep -q 'lost the lock' '$D/run.err'" || return 1
  contains "$D/run.err" "goes on WITHOUT the lock (--on-lost=ignore)" || return 1
  alive "$pid" && alive "$(cat "$D/pid")" || fail "the command stopped with --on-lost=ignore" || return 1
  touch "$D/release"
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 4 ] || fail "exit $ST, expected the command's 4" || return 1
  [ -e "$D/ran-on" ] || fail "the command did not run on" || return 1
  # bad values are usage errors, and the command does not run
  expect 64 "$DL" run --on-lost=stop "$k" -- touch "$D/ran" || return 1
  contains "$D/err" "invalid --on-lost 'stop' (term, kill or ignore)" || return 1
  expect 64 "$DL" run --grace=soon "$k" -- touch "$D/ran" || return 1
  absent "$D/ran"
}

# The lease is lost because its only redis-server dies mid-job (SIGKILL: it
# is simply gone). By default the command is stopped: SIGTERM, exit 79, and
# a message that says so. The job would run ~6 s and then exit 0; it must not
# get there. Nothing says the lock "expires by itself": it already has.
t_redis_gone_stops_the_command_by_default() {
  local k=cli:gone:$RANDOM port
  port=$(bash "$HARNESS" start "$D/redis" 1) || return 1
  "$DL" run --servers "redis://127.0.0.1:$port" --ttl 1s "$k" -- sh -c '
    echo $$ > "$0/pid.tmp" && mv "$0/pid.tmp" "$0/pid"
    i=0; while [ $i -lt 300 ]; do sleep 0.02; i=$((i + 1)); done
    touch "$0/ran-to-end"' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -s '$D/pid' ]" || return 1
  local child t0; child=$(cat "$D/pid")
  t0=$(date +%s%N)
  kill -9 "$(cat "$D/redis/redis-$port.pid")"
  wait_exit "$pid" 15 || return 1
  echo "    the command was stopped and distlock exited $(since_ms "$t0") ms after redis-server died (--ttl 1s)" >&2
  [ "$ST" = 79 ] || fail "exit $ST, expected 79: $(cat "$D/run.err")" || return 1
  absent "$D/ran-to-end" || return 1
  ! alive "$child" || fail "the command still runs after the lease was lost" || return 1
  contains "$D/run.err" "lost the lock on '$k'" || return 1
  contains "$D/run.err" "stopping the command (pid $child): Terminated now, SIGKILL after 10.000s (--on-lost=term)" || return 1
  ! grep -q "expires by itself" "$D/run.err" || fail "says the lost lock expires by itself: $(cat "$D/run.err")" || return 1
}

# The same loss with a command that ignores SIGTERM: SIGKILL once the grace
# has passed (a short one here), and still exit 79.
t_redis_gone_kills_after_grace() {
  local k=cli:gonekill:$RANDOM port
  port=$(bash "$HARNESS" start "$D/redis" 1) || return 1
  "$DL" run -v --servers "redis://127.0.0.1:$port" --ttl 1s --grace 500ms "$k" -- sh -c '
    trap "date +%s%N > \"$0/term\"" TERM
    echo $$ > "$0/pid.tmp" && mv "$0/pid.tmp" "$0/pid"
    while [ ! -e "$0/release" ]; do sleep 0.02; done' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -s '$D/pid' ]" || return 1
  local child; child=$(cat "$D/pid")
  kill -9 "$(cat "$D/redis/redis-$port.pid")"
  wait_until 10 "[ -s '$D/term' ]" || return 1
  wait_exit "$pid" 10 || return 1
  echo "    SIGKILL came $(since_ms "$(cat "$D/term")") ms after SIGTERM, counted to distlock's exit (--grace 500ms)" >&2
  [ "$ST" = 79 ] || fail "exit $ST, expected 79: $(cat "$D/run.err")" || return 1
  ! alive "$child" || fail "the command survived SIGKILL" || return 1
  contains "$D/run.err" "Terminated now, SIGKILL after 500ms (--on-lost=term)" || return 1
  contains "$D/run.err" "(--grace); sending SIGKILL" || return 1
  contains "$D/run.err" "was killed by Killed" || return 1
  contains "$D/run.err" "lost earlier (its lease has already ended: nothing is held)" || return 1
  ! grep -q "expires by itself" "$D/run.err" || fail "says the lost lock expires by itself: $(cat "$D/run.err")" || return 1
}

# --on-lost=ignore keeps the old behaviour: the command runs on past the loss
# and distlock exits with its status; the messages say it ran without the
# lock and, the release failing, that nothing is held.
t_redis_gone_ignore_runs_on() {
  local k=cli:goneign:$RANDOM port
  port=$(bash "$HARNESS" start "$D/redis" 1) || return 1
  "$DL" run --servers "redis://127.0.0.1:$port" --ttl 1s --on-lost=ignore "$k" -- sh -c '
    echo $$ > "$0/pid.tmp" && mv "$0/pid.tmp" "$0/pid"
    while [ ! -e "$0/release" ]; do sleep 0.02; done
    touch "$0/ran-on"; exit 4' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -s '$D/pid' ]" || return 1
  kill -9 "$(cat "$D/redis/redis-$port.pid")"
  wait_until 10 "grep -q 'lost the lock' '$D/run.err'" || return 1
  contains "$D/run.err" "goes on WITHOUT the lock (--on-lost=ignore)" || return 1
  alive "$pid" && alive "$(cat "$D/pid")" || fail "the command stopped with --on-lost=ignore" || return 1
  touch "$D/release"
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 4 ] || fail "exit $ST, expected the command's 4: $(cat "$D/run.err")" || return 1
  [ -e "$D/ran-on" ] || fail "the command did not run on" || return 1
  contains "$D/run.err" "lost earlier (its lease has already ended: nothing is held)" || return 1
  ! grep -q "expires by itself" "$D/run.err" || fail "says the lost lock expires by itself: $(cat "$D/run.err")" || return 1
}

# A renewal the server refuses (an ACL user without GET: the renewal script
# cannot read the key) is no loss while the lease is valid: the command runs
# on, and the key keeps its token. Only when the lease runs out unrenewed is
# it lost (--kill-on-lost: 79). ttl 6 s: the first renewal is due at 2 s, the
# check runs once the key's PTTL is below 3.5 s, with ~3.4 s left.
t_refused_renewal_is_not_a_loss() {
  local k=cli:refused:$RANDOM pttl
  rcli ACL SETUSER clacl reset on '>cl-acl-pw' '~*' '&*' '+@all' '-get' >/dev/null
  "$DL" run --servers "redis://clacl:cl-acl-pw@127.0.0.1:$PORT" --ttl 6s --kill-on-lost "$k" -- \
    sh -c 'touch "$0/ready"; while [ ! -e "$0/release" ]; do sleep 0.02; done' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -e '$D/ready' ]" || return 1
  wait_until 10 "pttl=\$(rcli PTTL '$k'); [ \"\$pttl\" -ge 0 ] && [ \"\$pttl\" -lt 3500 ]" \
    || fail "PTTL of $k: $(rcli PTTL "$k")" || return 1
  alive "$pid" || fail "the command was stopped at a refused renewal: $(cat "$D/run.err")" || return 1
  [ -n "$(rcli GET "$k")" ] || fail "the key is gone" || return 1
  ! grep -q "lost the lock" "$D/run.err" || fail "reported lost: $(cat "$D/run.err")" || return 1
  # the lease runs out unrenewed: now it is lost
  wait_exit "$pid" 15 || return 1
  [ "$ST" = 79 ] || fail "exit $ST, expected 79 once the lease ran out: $(cat "$D/run.err")" || return 1
  rcli ACL DELUSER clacl >/dev/null
}

t_status_and_release() {
  local k=cli:admin:$RANDOM
  expect 1 "$DL" status "$k" && contains "$D/out" "free" || return 1
  hold "$k" --ttl 20s || return 1
  local tok; tok=$(cat "$D/ready")
  expect 0 "$DL" status "$k" || return 1
  contains "$D/out" "^$k: held by $tok" || return 1
  contains "$D/out" "redis://127.0.0.1:$PORT  held  expires in 1[0-9]\.[0-9]*s  token $tok" || return 1
  expect 0 "$DL" status -q "$k" && [ ! -s "$D/out" ] || fail "-q printed" || return 1
  # Not without --force or the right token.
  expect 64 "$DL" release "$k" || return 1
  expect 1 "$DL" release --token 0123456789abcdef0123456789abcdef "$k" || return 1
  [ "$(rcli get "$k")" = "$tok" ] || fail "released by a wrong token" || return 1
  expect 0 "$DL" release --token "$tok" "$k" || return 1
  [ "$(rcli exists "$k")" = 0 ] || fail "--token did not release" || return 1
  expect 1 "$DL" release --force "$k" && contains "$D/out" "not held" || return 1
  # A lock of a foreign implementation (plain SET NX PX) is shown and can be forced.
  rcli set "$k" "php:12345" px 60000 nx >/dev/null
  expect 0 "$DL" status "$k" && contains "$D/out" "held by php:12345" || return 1
  rcli set "$k" "no expiry" >/dev/null
  expect 0 "$DL" status "$k" && contains "$D/out" 'no expiry  token no\\x20expiry' || return 1
  expect 0 "$DL" release -f "$k" && contains "$D/out" "deleted on 1 of 1 node" || return 1
  [ "$(rcli exists "$k")" = 0 ] || fail "--force did not delete"
  touch "$D/release"; wait_exit "$HOLDER" 10
}

t_servers_option_and_environment() {
  local k=cli:servers:$RANDOM
  # --servers wins over DISTLOCK_SERVERS.
  DISTLOCK_SERVERS=redis://127.0.0.1:1 expect 0 "$DL" run --servers "redis://127.0.0.1:$PORT" "$k" -- sh -c 'redis-cli -p "$REDIS_PORT" get "$DISTLOCK_KEY" > "$0/seen"' "$D" || return 1
  [ -s "$D/seen" ] || fail "lock not taken on --servers" || return 1
  # DISTLOCK_SERVERS is used without --servers: an unreachable server is a
  # distinct status (69), with the reason, and the command does not run.
  DISTLOCK_SERVERS=redis://127.0.0.1:1 expect 69 "$DL" run --connect-timeout 300ms "$k" -- touch "$D/ran" || return 1
  contains "$D/err" "127.0.0.1:1" || return 1
  absent "$D/ran" || return 1
  DISTLOCK_SERVERS=redis://127.0.0.1:1 expect 69 "$DL" status "$k" || return 1
  contains "$D/out" "error" || return 1
  # Unix socket URI.
  local sock=$TMP/redis1/redis-$PORT.sock
  expect 0 "$DL" run --servers "unix://$sock" "$k" -- sh -c 'redis-cli -p "$REDIS_PORT" exists "$DISTLOCK_KEY" > "$0/ex"' "$D" || return 1
  [ "$(cat "$D/ex")" = 1 ] || fail "not held through the unix socket"
}

t_redlock_three_nodes() {
  local k=cli:redlock:$RANDOM
  local ports; ports=$(echo "$URIS3" | tr ',' '\n' | sed 's/.*://')
  # The token on all 3 nodes while the command runs.
  hold_on_every_node "$k" "$ports" --servers "$URIS3" --ttl 10s || return 1
  expect 0 "$DL" status --servers "$URIS3" "$k" || return 1
  contains "$D/out" "held on 3 of 3 nodes, quorum 2" || return 1
  [ "$(grep -c "  held  " "$D/out")" = 3 ] || fail "per-node lines: $(cat "$D/out")" || return 1
  expect 75 "$DL" run --servers "$URIS3" "$k" -- true || return 1
  # One node loses the key: still held on a quorum; status says 2 of 3.
  redis-cli -p "$(echo "$ports" | head -1)" del "$k" >/dev/null
  expect 0 "$DL" status --servers "$URIS3" "$k" && contains "$D/out" "held on 2 of 3" || return 1
  touch "$D/release"
  wait_exit "$HOLDER" 10 || return 1
  [ "$ST" = 0 ] || fail "exit $ST: $(cat "$D/holder.err")" || return 1
  expect 1 "$DL" status --servers "$URIS3" "$k" && contains "$D/out" "free" || return 1
}

t_redlock_node_down() {
  local k=cli:redlock-down:$RANDOM
  local port1; port1=$(echo "$URIS3" | cut -d, -f1 | sed 's/.*://')
  STOPPED_PID=$(cat "$TMP/redis3/redis-$port1.pid")
  # A hung node (SIGSTOP) costs at most --timeout; 2 of 3 is still a quorum.
  kill -STOP "$STOPPED_PID"
  local t0 ms; t0=$(date +%s%N)
  expect 0 "$DL" run --servers "$URIS3" --timeout 200ms --connect-timeout 200ms "$k" -- sh -c '
    echo "$DISTLOCK_TOKEN" > "$0/ready"' "$D" || return 1
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "    run with one of 3 nodes hung (--timeout 200ms): ${ms} ms" >&2
  [ "$ms" -lt 2000 ] || fail "took ${ms} ms with --timeout 200ms" || return 1
  rm -f "$D/ready"  # (the run above wrote it: hold must wait for its own)
  hold "$k" --servers "$URIS3" --timeout 200ms --connect-timeout 200ms || return 1
  expect 0 "$DL" status --servers "$URIS3" --timeout 200ms --connect-timeout 200ms "$k" || return 1
  contains "$D/out" "held on 2 of 3 nodes, quorum 2, 1 not answering" || return 1
  contains "$D/out" "127.0.0.1:$port1  error: " || return 1
  touch "$D/release"; wait_exit "$HOLDER" 10 || return 1
  [ "$ST" = 0 ] || fail "holder exit $ST: $(cat "$D/holder.err")" || return 1
  kill -CONT "$STOPPED_PID"; STOPPED_PID=""
}

# One meaning per status: frozen nodes (the proxy holds every byte
# of a listener both ways) tell the same story as in C, PHP and Python
# (docs/errors.md "Statuses in each front end"). Only a real holder exits 75.
FZ=(--timeout 300ms --connect-timeout 300ms)

# The lease is lost under a shell script whose work runs in a child of the
# shell, as in any script that runs a program. "Stopping the command" must
# stop that work too: once distlock has exited 79 the key is free and
# another host may start the same job, so the job must not run on.
t_lost_lock_stops_the_commands_children() {
  local k=cli:lostkids:$RANDOM
  "$DL" run --ttl 1s "$k" -- sh -c '
    sh -c "echo \$\$ > \"\$0/worker.tmp\" && mv \"\$0/worker.tmp\" \"\$0/worker\"
           while [ ! -e \"\$0/release\" ]; do sleep 0.02; done" "$0"
    touch "$0/after-worker"' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -s '$D/worker' ]" || return 1
  local worker; worker=$(cat "$D/worker")
  rcli del "$k" >/dev/null
  wait_exit "$pid" 15 || return 1
  [ "$ST" = 79 ] || fail "exit $ST, expected 79: $(cat "$D/run.err")" || return 1
  contains "$D/run.err" "stopping the command" || return 1
  absent "$D/after-worker" || return 1
  wait_until 5 "! alive $worker" ||
    fail "the command's work (pid $worker) still runs after distlock exited 79; key '$k' exists: $(rcli exists "$k")" || return 1
}

# Replies come back late (a slow return path; requests reach the server on
# time) while the command runs: each renewal is done on the server at once
# but confirmed 2.5 s later (--ttl 3s, a generous --timeout). The next
# renewal is then scheduled from the late confirmation, after the lease has
# run out on the server. The README's rule: a lease that cannot be renewed is
# lost when its validity ends. So either the key is kept, or the command is
# stopped within a renewal period (TTL/3, plus 500 ms of slack for the
# command's own polling) of its key going away; not seconds later.
t_lease_run_out_under_slow_replies_stops_the_command() {
  local k=cli:slowreply:$RANDOM uris p0
  start_proxy || return 1
  uris=$(proxy_uris 0)
  p0=$(echo "$URIS3" | cut -d, -f1 | sed 's/.*://')
  # The command polls its key every 50 ms for up to ~20 s and notes when it
  # first finds it gone, and when SIGTERM comes.
  "$DL" run --servers "$uris" --timeout 10s --ttl 3s "$k" -- sh -c '
    trap "date +%s%N > \"\$0/term_at\"; exit 0" TERM
    touch "$0/started"
    i=0; while [ $i -lt 400 ]; do
      if [ ! -e "$0/gone_at" ] && [ "$(redis-cli -p "$1" get "$2")" != "$DISTLOCK_TOKEN" ]; then
        date +%s%N > "$0/gone_at"
      fi
      sleep 0.05; i=$((i + 1))
    done
    touch "$0/ran-to-end"' "$D" "$p0" "$k" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -e '$D/started' ]" || return 1
  fpctl delay 0 2500 down || return 1
  wait_exit "$pid" 60 || return 1
  [ -e "$D/gone_at" ] || return 0   # the lease was kept all along
  [ ! -e "$D/ran-to-end" ] || fail "the command ran to its end without its key: exit $ST" || return 1
  local ms=$(( ($(cat "$D/term_at") - $(cat "$D/gone_at")) / 1000000 ))
  echo "    the command was stopped ${ms} ms after its key was gone (--ttl 3s); exit $ST" >&2
  [ "$ms" -le 1500 ] || fail "stopped only ${ms} ms after the key was gone: $(grep -v '^  ' "$D/run.err")" || return 1
  [ "$ST" = 79 ] || fail "exit $ST, expected 79"
}

# The servers' replies stop coming (requests still get through: the server
# renews the key, the confirmation never arrives). When the lease's validity
# ends distlock cannot vouch for it and stops the command; but it must not
# say the lock "expired, deleted or taken over" while the key is still there
# with its token (its TTL reset by the last renewal the server ran).
t_lost_is_said_only_of_a_lock_that_is_gone() {
  local k=cli:noreply:$RANDOM uris p0
  start_proxy || return 1
  uris=$(proxy_uris 0)
  p0=$(echo "$URIS3" | cut -d, -f1 | sed 's/.*://')
  # At SIGTERM the command notes what the server holds under its key.
  "$DL" run --servers "$uris" --ttl 3s "$k" -- sh -c '
    trap "redis-cli -p \"\$1\" get \"\$2\" > \"\$0/at_term\"; exit 0" TERM
    touch "$0/started"
    i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done' "$D" "$p0" "$k" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -e '$D/started' ]" || return 1
  local token; token=$(redis-cli -p "$p0" get "$k")
  [ -n "$token" ] || fail "no key after the start" || return 1
  fpctl hold 0 down || return 1
  wait_exit "$pid" 30 || return 1
  [ "$ST" = 79 ] || fail "exit $ST, expected 79: $(grep -v '^  ' "$D/run.err")" || return 1
  [ -e "$D/at_term" ] || fail "the command got no SIGTERM" || return 1
  if [ "$(cat "$D/at_term")" = "$token" ]; then
    ! grep -q "expired, deleted or taken over" "$D/run.err" ||
      fail "said the lock expired, was deleted or taken over while the server still held it with our token: $(grep -v '^  ' "$D/run.err")" || return 1
  fi
}

t_frozen_one_of_three() {
  local k=cli:frozen1:$RANDOM t0 ms uris
  start_proxy || return 1
  uris=$(proxy_uris 0 1 2)
  fpctl hold 2 || return 1
  t0=$(date +%s%N)
  expect 0 "$DL" run --servers "$uris" "${FZ[@]}" "$k" -- true || return 1
  ms=$(since_ms "$t0"); echo "    run with node 2 of 3 frozen: exit 0 in ${ms} ms" >&2
  [ "$ms" -lt 2000 ] || fail "took ${ms} ms" || return 1
  # A holder on the two live nodes: another run is refused as "held", 75,
  # at once and after --wait.
  hold "$k" --servers "$uris" "${FZ[@]}" || return 1
  expect 75 "$DL" run --servers "$uris" "${FZ[@]}" "$k" -- true || return 1
  contains "$D/err" "is locked by another owner" || return 1
  expect 75 "$DL" run --servers "$uris" "${FZ[@]}" --wait 400ms "$k" -- true || return 1
  contains "$D/err" "gave up after waiting" || return 1
  touch "$D/release"; wait_exit "$HOLDER" 10 || return 1
  [ "$ST" = 0 ] || fail "holder exit $ST: $(cat "$D/holder.err")" || return 1
  expect 0 "$DL" run --servers "$uris" "${FZ[@]}" "$k" -- true || return 1
}

t_frozen_only_node() {
  local k=cli:frozen-only:$RANDOM t0 ms w uris
  start_proxy || return 1
  uris=$(proxy_uris 0)
  fpctl hold 0 || return 1
  for w in 0 3s; do
    t0=$(date +%s%N)
    expect 69 "$DL" run --servers "$uris" "${FZ[@]}" --wait "$w" "$k" -- true || return 1
    ms=$(since_ms "$t0"); echo "    the only node frozen, --wait $w: exit 69 in ${ms} ms" >&2
    [ "$ms" -lt 2000 ] || fail "took ${ms} ms with --timeout 300ms" || return 1
    contains "$D/err" "cannot lock '$k': node unreachable or not replying" || return 1
    contains "$D/err" "127.0.0.1:${FP_PORTS[0]}" || return 1
    not_held "$D/err" || return 1
  done
  expect 69 "$DL" release --servers "$uris" "${FZ[@]}" --token t "$k" || return 1
  not_held "$D/err" || return 1
}

t_frozen_two_of_three() {
  local k=cli:frozen2:$RANDOM t0 ms uris
  start_proxy || return 1
  uris=$(proxy_uris 0 1 2)
  fpctl hold 1 || return 1
  fpctl hold 2 || return 1
  t0=$(date +%s%N)
  expect 69 "$DL" run --servers "$uris" "${FZ[@]}" --wait 3s "$k" -- true || return 1
  ms=$(since_ms "$t0"); echo "    two of three frozen: exit 69 in ${ms} ms" >&2
  [ "$ms" -lt 2000 ] || fail "took ${ms} ms with --timeout 300ms" || return 1
  contains "$D/err" "quorum" || return 1
  not_held "$D/err" || return 1
}

t_granted_after_ttl() {
  local k=cli:too-late:$RANDOM uris
  start_proxy || return 1
  uris=$(proxy_uris 0 1 2)
  expect 0 "$DL" run --servers "$uris" "$k" -- true || return 1   # scripts loaded
  # Every request reaches its node 300 ms late: a 100 ms lease granted by a
  # quorum is over before the replies are back. Not held: 69, not 75.
  fpctl delay '*' 300 up || return 1
  expect 69 "$DL" run --servers "$uris" --timeout 2s --ttl 100ms --wait 5s "$k" -- true || return 1
  contains "$D/err" "nothing is held" || return 1
  contains "$D/err" "ttl was used up" || return 1
  not_held "$D/err" || return 1
  fpctl delay '*' 0 up || return 1
}

# The verdict of `status` is the library's, from one round to every node
# (distlock_admin_holder); the per-node lines under it are for display.
t_status_verdict_one_round() {
  local k=cli:verdict:$RANDOM p
  local ports; ports=$(echo "$URIS3" | tr ',' '\n' | sed 's/.*://')
  local p1 p2 p3; read -r p1 p2 p3 <<<"$(echo $ports)"
  # Split: a different token on each node: not held, the first one named.
  for p in $p1 $p2 $p3; do redis-cli -p "$p" set "$k" "tok$p" px 30000 >/dev/null; done
  expect 1 "$DL" status --servers "$URIS3" "$k" || return 1
  contains "$D/out" "^$k: not held by any owner on a quorum (held on 1 of 3 nodes, quorum 2; most common token tok$p1; other tokens or values on 2)" || return 1
  contains "$D/out" "^per node" || return 1
  # Written behind the library's back on 2 of 3: held by it, shortest lease.
  redis-cli -p "$p2" set "$k" "tok$p1" px 9000 >/dev/null
  expect 0 "$DL" status --servers "$URIS3" "$k" || return 1
  contains "$D/out" "^$k: held by tok$p1 (held on 2 of 3 nodes, quorum 2; expires in [0-9]\.[0-9]*s; other tokens or values on 1)" || return 1
  # A key of another type is someone else's, not an error.
  local w=cli:wrongtype:$RANDOM
  rcli hset "$w" f v >/dev/null
  expect 1 "$DL" status "$w" || return 1
  contains "$D/out" "^$w: not held by any owner on a quorum (held on 0 of 1 node, quorum 1; other tokens or values on 1)" || return 1
  contains "$D/out" "127.0.0.1:$PORT  taken  by a value of another type" || return 1
  # One node hung: a verdict from the two others, where the silent one
  # cannot change it ...
  STOPPED_PID=$(cat "$TMP/redis3/redis-$p3.pid")
  kill -STOP "$STOPPED_PID"
  local t="--timeout 500ms --connect-timeout 500ms"
  # shellcheck disable=SC2086
  expect 0 "$DL" status --servers "$URIS3" $t "$k" || return 1
  contains "$D/out" "held by tok$p1 (held on 2 of 3 nodes, quorum 2, 1 not answering" || return 1
  # ... and none where it could (one token on one of the two that answer).
  redis-cli -p "$p2" del "$k" >/dev/null
  # shellcheck disable=SC2086
  expect 69 "$DL" status --servers "$URIS3" $t "$k" || return 1
  contains "$D/out" "^$k: unknown (too many nodes did not answer) (held on 1 of 3 nodes, quorum 2, 1 not answering" || return 1
  # Two hung: no quorum answered. One round: the two silent nodes cost one
  # timeout together (-q: no per-node lines, which read each node alone).
  local p2pid; p2pid=$(cat "$TMP/redis3/redis-$p2.pid")
  kill -STOP "$p2pid"
  local t0 ms; t0=$(date +%s%N)
  # shellcheck disable=SC2086
  expect 69 "$DL" status -q --servers "$URIS3" $t "$k" || { kill -CONT "$p2pid"; return 1; }
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  kill -CONT "$p2pid"
  echo "    status -q with 2 of 3 nodes hung (timeouts 500ms): ${ms} ms" >&2
  [ "$ms" -lt 950 ] || fail "took ${ms} ms: the nodes were not asked in one round" || return 1
  kill -CONT "$STOPPED_PID"; STOPPED_PID=""
  for p in $p1 $p2 $p3; do redis-cli -p "$p" del "$k" >/dev/null; done
}

t_verbose_and_fence() {
  local k=cli:fence:$RANDOM
  expect 0 "$DL" run -v --fence "$k" -- sh -c 'echo "$DISTLOCK_FENCE" > "$0/f1"' "$D" || return 1
  contains "$D/err" "acquired '$k' after [0-9.]*m\?s (token [0-9a-f]\{32\}, fence [0-9]*" || return 1
  contains "$D/err" "released '$k'; the command ran [0-9.]*m\?s and exited with status 0" || return 1
  expect 0 "$DL" run --fence "$k" -- sh -c 'echo "$DISTLOCK_FENCE" > "$0/f2"' "$D" || return 1
  local f1 f2; f1=$(cat "$D/f1"); f2=$(cat "$D/f2")
  [ "$f1" -ge 0 ] && [ "$f2" -gt "$f1" ] || fail "fencing tokens $f1 then $f2 do not increase" || return 1
  # Without --fence there is no DISTLOCK_FENCE, even if the caller had one.
  DISTLOCK_FENCE=stale expect 0 "$DL" run "$k" -- sh -c 'echo "${DISTLOCK_FENCE-unset}" > "$0/f3"' "$D" || return 1
  [ "$(cat "$D/f3")" = unset ] || fail "DISTLOCK_FENCE leaked: $(cat "$D/f3")"
  expect 0 "$DL" run -q "$k" -- true && [ ! -s "$D/err" ] || fail "-q printed $(cat "$D/err")"
}

t_password_from_environment() {
  local k=cli:auth:$RANDOM p
  p=$(bash "$HARNESS" start "$D/redis" 1) || return 1
  redis-cli -p "$p" config set requirepass 's3cret pass' >/dev/null
  DISTLOCK_PASSWORD='s3cret pass' expect 0 "$DL" run --servers "redis://127.0.0.1:$p" "$k" -- true || return 1
  expect 69 "$DL" run --servers "redis://127.0.0.1:$p" "$k" -- touch "$D/ran" || return 1
  contains "$D/err" "$p" || return 1
  DISTLOCK_PASSWORD=wrong expect 69 "$DL" run --servers "redis://127.0.0.1:$p" "$k" -- touch "$D/ran" || return 1
  absent "$D/ran"
}

# No password is ever printed: not in -v, error messages, status, nor echoes
# of --servers / $DISTLOCK_SERVERS / $DISTLOCK_PASSWORD. The URI is shown with
# "***" in its place. A real ACL user makes the good-URI cases connect. Every
# case runs and counts, so that a failure lists every leak.
t_passwords_never_shown() {
  local k=cli:secret:$RANDOM p free sec=S3cretPassw0rd n=0 leaks=0 pw
  p=$(bash "$HARNESS" start "$D/redis" 1) || return 1
  redis-cli -p "$p" ACL SETUSER bob on ">$sec" '~*' '&*' '+@all' >/dev/null
  free=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local good="redis://bob:$sec@127.0.0.1:$p"
  # shown WANT STATUS CMD...: CMD exits STATUS, WANT (a grep pattern) is in
  # its stdout or stderr, and no piece of the password is in either.
  shown() {
    local want=$1; shift
    n=$((n + 1))
    if ! expect "$@"; then leaks=$((leaks + 1)); return 0; fi
    cat "$D/out" "$D/err" > "$D/all.$n"
    if grep -q -e S3cret -e Passw0rd "$D/all.$n"; then
      echo "    FAIL: case $n: password shown by ${*:2}:" >&2; sed 's/^/      /' "$D/all.$n" >&2
      leaks=$((leaks + 1))
    elif ! contains "$D/all.$n" "$want"; then
      leaks=$((leaks + 1))
    fi
  }
  # Good URI: connects as bob (the command sees its connection), -v names the server.
  shown "redis://bob:\*\*\*@127.0.0.1:$p " 0 "$DL" run -v --servers "$good" "$k" -- \
    sh -c 'redis-cli -p "$1" CLIENT LIST | grep -q "user=bob"' sh "$p"
  hold "$k" --servers "$good" || return 1
  shown "redis://bob:\*\*\*@127.0.0.1:$p  held" 0 "$DL" status -v --servers "$good" "$k"
  shown "redis://bob:\*\*\*@127.0.0.1:$p" 75 "$DL" run -v --servers "$good" "$k" -- true
  touch "$D/release"; wait_exit "$HOLDER" 10 || return 1
  DISTLOCK_SERVERS=$good shown "bob:\*\*\*@" 0 "$DL" run -v "$k" -- true
  DISTLOCK_USERNAME=bob DISTLOCK_PASSWORD=$sec shown "127.0.0.1:$p" 0 \
    "$DL" run -v --servers "redis://127.0.0.1:$p" "$k" -- true
  # Bad port: the library's message quotes the URI, and the command's echo
  # shows it the library's way (everything between "://" and the last '@').
  shown "'redis://\*\*\*@127.0.0.1:99999'" 64 "$DL" run --servers "redis://bob:$sec@127.0.0.1:99999" "$k" -- true
  DISTLOCK_SERVERS="redis://bob:$sec@127.0.0.1:99999" shown "redis://\*\*\*@127.0.0.1:99999" 64 "$DL" status "$k"
  # Unreachable: nothing on the port, and an unroutable address.
  shown "redis://bob:\*\*\*@127.0.0.1:$free" 69 "$DL" run -v --servers "redis://bob:$sec@127.0.0.1:$free" "$k" -- true
  shown "redis://bob:\*\*\*@127.0.0.1:$free  error" 69 "$DL" status --servers "redis://bob:$sec@127.0.0.1:$free" "$k"
  shown "redis://bob:\*\*\*@192.0.2.1:" 69 "$DL" status --connect-timeout 200ms --servers "redis://bob:$sec@192.0.2.1:6379" "$k"
  # status --json and list: URIs and errors masked the same way
  shown '"uri": "redis://bob:\*\*\*@127.0.0.1:'"$p"'"' 1 "$DL" status --json --servers "$good" "$k"
  shown '"error": ".*redis://bob:\*\*\*@127.0.0.1:'"$free" 69 "$DL" status --json --servers "redis://bob:$sec@127.0.0.1:$free" "$k"
  shown "cannot scan redis://bob:\*\*\*@127.0.0.1:$free" 69 "$DL" list --servers "redis://bob:$sec@127.0.0.1:$free" "$k*"
  DISTLOCK_USERNAME=bob DISTLOCK_PASSWORD=$sec shown "127.0.0.1:$free" 69 \
    "$DL" run -v --servers "redis://127.0.0.1:$free" "$k" -- true
  # A wrong password for bob on the good server: refused, and not shown.
  shown "redis://bob:\*\*\*@127.0.0.1:$p" 69 "$DL" run --servers "redis://bob:${sec}x@127.0.0.1:$p" "$k" -- true
  # Passwords the list parser cuts up or quotes in pieces: %-escapes, a raw
  # ',' ' ' '@' or '/', and the query parameters of sentinel-style URIs.
  for pw in "S3cret%40Passw0rd" "S3cret,Passw0rd" "S3cret Passw0rd" "S3cret@Passw0rd" "S3cret/Passw0rd"; do
    shown "redis://\*\*\*@127.0.0.1:99999" 64 "$DL" run --servers "redis://bob:$pw@127.0.0.1:99999" "$k" -- true
  done
  # (a masked value runs to the next option whose value is shown: "&password=..."
  # may be part of the sentinel password)
  shown "redis-sentinel://\*\*\*@h1,h2/mymaster?sentinel_password=\*\*\*'" 64 "$DL" status \
    --servers "redis-sentinel://bob:$sec@h1,h2/mymaster?sentinel_password=$sec&password=$sec" "$k"
  shown "redis://\*\*\*@127.0.0.1:$free" 64 "$DL" status --servers "redis://127.0.0.1:$p,redis://u:$sec@127.0.0.1:$free,,redis://h:3" "$k"
  # A mistyped option echoes its argument (as the library shows a server list).
  shown "--servres=redis://\*\*\*@127.0.0.1:$p" 64 "$DL" run --servres="$good" "$k" -- true
  [ "$leaks" -eq 0 ] || fail "$leaks of $n cases failed"
}

# A server's error reply may quote the password the command sent: Redis
# answers a command it does not know (AUTH renamed away: rename-command AUTH
# "") with "ERR unknown command 'AUTH', with args beginning with: 'user'
# 'PASSWORD'", cut at 128 bytes, and the library cuts the reply again. A
# password longer than the cut appears only in part there: no piece of it may
# be shown (stderr, status, status --json).
t_server_reply_quoting_a_long_password() {
  local k=cli:authecho:$RANDOM p n=0 leaks=0 pw
  pw=$(printf 'Q%.0s' $(seq 1 40))S3cretPart$(printf 'Z%.0s' $(seq 1 100))
  p=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port "$p" --bind 127.0.0.1 --save '' --dir "$D" --logfile "$D/authecho.log" \
    --rename-command AUTH '' >/dev/null 2>&1 &
  local srv=$!
  track "$srv"
  wait_until 10 "redis-cli -p $p PING 2>/dev/null | grep -q PONG" || { kill -9 "$srv"; return 1; }
  leak() {
    n=$((n + 1))
    "$@" >"$D/out.$n" 2>&1 || true
    if grep -q -e S3cretPart -e QQQQQQQQQQ -e ZZZZZZZZZZ "$D/out.$n"; then
      echo "    FAIL: case $n: password shown by ${*:2}:" >&2; sed 's/^/      /' "$D/out.$n" >&2
      leaks=$((leaks + 1))
    fi
  }
  leak "$DL" run --servers "redis://bob:$pw@127.0.0.1:$p" "$k" -- true
  leak "$DL" status --servers "redis://bob:$pw@127.0.0.1:$p" "$k"
  leak "$DL" status --json --servers "redis://:$pw@127.0.0.1:$p" "$k"
  DISTLOCK_SERVERS="redis://bob:$pw@127.0.0.1:$p" leak "$DL" run "$k" -- true
  kill -9 "$srv"
  [ "$leaks" -eq 0 ] || fail "$leaks of $n cases showed a piece of the password"
}

# A server list the library refuses is echoed by the command as given, masked
# by distlock_servers_mask() ("bad --servers/DISTLOCK_SERVERS '...'"). The
# library's rule (docs/errors.md "Passwords are never shown"): everything between "scheme://" and the
# entry's last '@' is masked, and the value of every query parameter that is
# not a known non-secret option, whatever its name's spelling (case,
# %-escapes). The echo must hide at least as much as the library's message.
t_bad_server_list_masked_like_the_library() {
  local k=cli:badlist:$RANDOM n=0 leaks=0 s
  for s in 'redis://S3cretPw0rd@127.0.0.1:99999' \
           'redis-sentinel://h1:26379/m?sentinel_p%61ssword=S3cretPw0rd' \
           'redis-sentinel://h1:26379/m?auth=S3cretPw0rd'; do
    n=$((n + 1))
    "$DL" status --servers "$s" "$k" >"$D/out.$n" 2>&1 || true
    DISTLOCK_SERVERS=$s "$DL" run "$k" -- true >>"$D/out.$n" 2>&1 || true
    if grep -q S3cretPw0rd "$D/out.$n"; then
      echo "    FAIL: case $n: password shown for $s:" >&2; sed 's/^/      /' "$D/out.$n" >&2
      leaks=$((leaks + 1))
    fi
  done
  [ "$leaks" -eq 0 ] || fail "$leaks of $n server lists showed their password"
}

# TLS: a CA and certificates made for this test (tests/harness/certs.sh), a
# server with a TLS port; the CA by flag or by environment; verification on
# by default (exit 69 with the node and the reason); --tls-insecure works and
# warns.
t_tls() {
  local k=cli:tls:$RANDOM uri
  bash "$REPO/tests/harness/certs.sh" "$D/certs" || return 1
  DISTLOCK_TLS_CERTS=$D/certs bash "$HARNESS" start "$D/redis" 1 >/dev/null || return 1
  uri=$(bash "$HARNESS" tls-uris "$D/redis")
  expect 0 "$DL" run --servers "$uri" --tls-ca-file "$D/certs/ca.crt" "$k" -- touch "$D/ran1" || return 1
  [ -e "$D/ran1" ] || fail "command did not run"
  DISTLOCK_TLS_CA_FILE=$D/certs/ca.crt DISTLOCK_TLS_CERT=$D/certs/client.crt \
    DISTLOCK_TLS_KEY=$D/certs/client.key expect 0 "$DL" run --servers "$uri" "$k" -- true || return 1
  expect 69 "$DL" run --servers "$uri" "$k" -- touch "$D/ran2" || return 1
  absent "$D/ran2"
  contains "$D/err" "$uri" || return 1
  contains "$D/err" "certificate verify failed" || return 1
  expect 69 "$DL" run --servers "$uri" --tls-ca-file "$D/certs/ca.crt" --tls-server-name wrong.example "$k" -- true || return 1
  contains "$D/err" "hostname mismatch" || return 1
  expect 0 "$DL" run --servers "$uri" --tls-insecure "$k" -- true || return 1
  contains "$D/err" "verification is OFF" || return 1
  bash "$HARNESS" stop "$D/redis"
}

# A redis-sentinel:// list works the same as a plain one (a Sentinel group:
# 1 master, 2 replicas, 3 sentinels with their own ACL user).
t_sentinel_same_as_plain() {
  local uri k=cli:sentinel:$RANDOM
  uri=$(bash "$HARNESS" sentinels "$TMP/sentinel" --data-pass data-pw \
          --sentinel-user sent --sentinel-pass sentinel-pw) || return 1
  local sport; sport=$(echo "$uri" | sed 's/.*@127.0.0.1:\([0-9]*\),.*/\1/')
  local mport; mport=$(redis-cli -p "$sport" --user sent --pass sentinel-pw --no-auth-warning \
                         SENTINEL GET-MASTER-ADDR-BY-NAME mymaster | tail -1)
  expect 0 "$DL" run --servers "$uri" --ttl 10s "$k" -- sh -c '
    redis-cli -p '"$mport"' -a data-pw --no-auth-warning get "$DISTLOCK_KEY" > "$0/val"
    echo "$DISTLOCK_TOKEN" > "$0/tok"' "$D" || return 1
  [ -s "$D/tok" ] && [ "$(cat "$D/val")" = "$(cat "$D/tok")" ] \
    || fail "the master holds '$(cat "$D/val")', token '$(cat "$D/tok")'" || return 1
  expect 1 "$DL" status --servers "$uri" "$k" && contains "$D/out" "free" || return 1
  ! grep -q "sentinel-pw\|data-pw" "$D/out" "$D/err" || fail "a password shown" || return 1
  # a wrong sentinel password: a clear error, without it
  local bad=${uri/sentinel_password=sentinel-pw/sentinel_password=wrong-one}
  "$DL" run --servers "$bad" "$k" -- true >"$D/out" 2>"$D/err" && fail "ran" && return 1
  contains "$D/err" "authentication failed" || return 1
  ! grep -q "wrong-one" "$D/err" || fail "the password shown: $(cat "$D/err")" || return 1
  bash "$HARNESS" stop "$TMP/sentinel"
}

# WAIT for replicas: --wait-replicas / --wait-replicas-timeout (and their
# environment variables) against a master and its replica; a SIGSTOPped
# replica never acknowledges: nothing runs, nothing is left held.
t_wait_replicas() {
  bash "$HARNESS" start "$D/redis" 2 >/dev/null
  local m r rpid k=wr:$RANDOM
  read -r m r rpid < <(bash "$HARNESS" replicate "$D/redis")
  local master=redis://127.0.0.1:$m
  # acknowledged: the key is on the replica while the command runs
  expect 0 "$DL" run --servers "$master" --wait-replicas 1 --wait-replicas-timeout 5s "$k" -- \
    sh -c '[ "$(redis-cli -p '"$r"' get "$DISTLOCK_KEY")" = "$DISTLOCK_TOKEN" ]'
  expect 64 "$DL" run --servers "$master" --wait-replicas 65 "$k" -- true
  contains "$D/err" '--wait-replicas: option "wait_replicas": value 65 out of range 0..64'
  DISTLOCK_WAIT_REPLICAS=x expect 64 "$DL" run --servers "$master" "$k" -- true
  contains "$D/err" 'DISTLOCK_WAIT_REPLICAS: option "wait_replicas" takes an integer, got "x"'
  # replica stopped: exit 69, the node and the count in the message, no key left
  kill -STOP "$rpid"; STOPPED_PID=$rpid
  DISTLOCK_WAIT_REPLICAS=1 DISTLOCK_WAIT_REPLICAS_TIMEOUT=100ms \
    expect 69 "$DL" run --servers "$master" "$k" -- touch "$D/ran"
  contains "$D/err" "$master: 0 of 1 replicas acknowledged within 100 ms"
  absent "$D/ran"
  [ "$(redis-cli -p "$m" exists "$k")" = 0 ] || fail "$k left on the master"
  # --wait-replicas 0 overrides the environment: granted on the master alone
  DISTLOCK_WAIT_REPLICAS=1 expect 0 "$DL" run --servers "$master" --wait-replicas 0 "$k" -- true
  kill -CONT "$rpid"; STOPPED_PID=""
}

# Library options by name (--option NAME=VALUE), and the flags that stand for
# them: each mistake is a usage error (64) with the library's own message,
# before anything is acquired or run; --help lists the library's table.
t_option_errors_from_the_library() {
  local k=opt:$RANDOM
  expect 64 "$DL" run --option nope=1 "$k" -- touch "$D/ran" || return 1
  contains "$D/err" 'unknown option "nope"' || return 1
  expect 64 "$DL" status --option wait_replica=1 "$k" || return 1
  contains "$D/err" 'unknown option "wait_replica" (did you mean "wait_replicas"?)' || return 1
  expect 64 "$DL" run --option wait_replicas=65 "$k" -- touch "$D/ran" || return 1
  contains "$D/err" '--option: option "wait_replicas": value 65 out of range 0..64' || return 1
  expect 64 "$DL" run --timeout 0 "$k" -- touch "$D/ran" || return 1
  contains "$D/err" '--timeout: option "command_timeout_ms": value 0 out of range 1..3600000' || return 1
  expect 64 "$DL" run --option connect_timeout_ms=1s "$k" -- touch "$D/ran" || return 1
  contains "$D/err" 'option "connect_timeout_ms" takes an integer, got "1s"' || return 1
  expect 64 "$DL" run --option username "$k" -- touch "$D/ran" || return 1
  contains "$D/err" "NAME=VALUE expected" || return 1
  absent "$D/ran" || return 1
  # a good value is taken: the last of a flag and --option wins
  expect 0 "$DL" run --timeout 0 --option command_timeout_ms=2000 "$k" -- touch "$D/ran" || return 1
  [ -e "$D/ran" ] || fail "the command did not run" || return 1
  expect 0 "$DL" run --help || return 1
  contains "$D/out" "wait_replicas *0 (0..64)" || return 1
}

# Metrics: -v prints this run's counters at exit; runs with
# --stats-file add theirs to one file; `stats --prometheus` prints it in the
# text exposition format (every line checked against the format's grammar).
t_stats_verbose_and_prometheus() {
  local k=cli:stats:$RANDOM f=$D/stats.txt i
  local refusals=2
  hold "$k" || return 1
  for ((i = 0; i < refusals; i++)); do
    expect 75 "$DL" run --stats-file "$f" "$k" -- true || return 1
  done
  echo 0 >"$D/release"
  wait_exit "$HOLDER" 10 || return 1
  DISTLOCK_STATS_FILE=$f expect 0 "$DL" run "$k" -- true || return 1
  expect 0 "$DL" stats "$f" || return 1
  grep -qx "acquire_refused_total $refusals" "$D/out" || fail "refusals: $(cat "$D/out")"
  grep -qx "acquire_granted_total 1" "$D/out" || fail "grants: $(cat "$D/out")"
  grep -qx "release_total 1" "$D/out" || fail "releases: $(cat "$D/out")"
  grep -qx "acquire_wait_us_count $((refusals + 1))" "$D/out" || fail "waits: $(cat "$D/out")"
  grep -qx "hold_us_count 1" "$D/out" || fail "holds: $(cat "$D/out")"
  # -v: this run's counters on stderr at exit (not the file's)
  expect 0 "$DL" run -v "$k" -- true || return 1
  contains "$D/err" "stats of this run:" || return 1
  grep -qx "  acquire_granted_total 1" "$D/err" || fail "-v: $(cat "$D/err")"
  grep -qx "  acquire_refused_total 0" "$D/err" || fail "-v: $(cat "$D/err")"
  # the exposition format
  expect 0 "$DL" stats --prometheus "$f" || return 1
  local bad
  bad=$(grep -Ev '^# HELP distlock_[a-z_]+ .+$|^# TYPE distlock_[a-z_]+ (counter|histogram)$|^distlock_[a-z_]+(\{[a-z]+="[^"]*"\})? [0-9]+(\.[0-9]+)?$' "$D/out" || true)
  [ -z "$bad" ] || fail "lines not in the exposition format: $bad"
  grep -qx "distlock_acquire_refused_total $refusals" "$D/out" || fail "prom refusals"
  grep -qx "# TYPE distlock_acquire_wait_seconds histogram" "$D/out" || fail "no histogram TYPE"
  local inf count
  inf=$(sed -n 's/^distlock_acquire_wait_seconds_bucket{le="+Inf"} //p' "$D/out")
  count=$(sed -n 's/^distlock_acquire_wait_seconds_count //p' "$D/out")
  [ "$inf" = $((refusals + 1)) ] && [ "$count" = "$inf" ] || fail "+Inf $inf, count $count"
  grep -q '^distlock_acquire_wait_seconds_bucket{le="0.000128"} ' "$D/out" || fail "bounds not in seconds"
  grep -q '^distlock_node_errors_total{node="0"} 0$' "$D/out" || fail "no per-node line"
  # the buckets are cumulative
  sed -n 's/^distlock_acquire_wait_seconds_bucket{le="[^"]*"} //p' "$D/out" |
    awk 'NR > 1 && $1 < prev { exit 1 } { prev = $1 }' || fail "buckets not cumulative"
  expect 66 "$DL" stats "$D/no-such-file" || return 1
  expect 64 "$DL" stats --bogus "$f" || return 1
}

# jq-like field access with python3 (already a dependency of the tests):
# jget FILE EXPR prints the Python expression EXPR of the JSON in FILE (d).
jget() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
jvalid() { python3 -m json.tool "$1" >/dev/null || fail "$1 is not valid JSON: $(head -c 400 "$1")"; }

# status --json: the documented fields, from the library's
# verdict and each node's own read; a fence when a fencing acquire made one.
t_status_json() {
  local k=cli:json:$RANDOM
  expect 1 "$DL" status --json "$k" && jvalid "$D/out" || return 1
  [ "$(jget "$D/out" '(d["key"], d["verdict"], d["held"], d["token"], d["ttl_ms"], d["fence"], d["nodes_total"], d["nodes"][0]["state"])')" \
    = "('$k', 'free', False, None, None, None, 1, 'free')" ] || fail "free: $(cat "$D/out")" || return 1
  hold_on_every_node "$k" "$(echo "$URIS3" | tr ',' '\n' | sed 's/.*://')" --servers "$URIS3" --fence --ttl 20s || return 1
  local tok; tok=$(cat "$D/ready")
  local fence; fence=$(redis-cli -p "$(echo "$URIS3" | sed 's/.*://')" get "{$k}:fence")
  expect 0 "$DL" status --json --servers "$URIS3" "$k" && jvalid "$D/out" || return 1
  [ "$(jget "$D/out" '(d["verdict"], d["held"], d["token"], d["holder_nodes"], d["nodes_total"], d["quorum"], d["answered"], d["fence"])')" \
    = "('held', True, '$tok', 3, 3, 2, 3, $fence)" ] || fail "held: $(cat "$D/out")" || return 1
  [ "$(jget "$D/out" '0 < d["ttl_ms"] <= 20000 and all(n["state"] == "held" and n["token"] == d["token"] and 0 < n["ttl_ms"] <= 20000 and n["fence"] == d["fence"] for n in d["nodes"])')" = True ] \
    || fail "per node: $(cat "$D/out")" || return 1
  [ "$(jget "$D/out" '[n["uri"] for n in d["nodes"]] == "'"$URIS3"'".split(",")')" = True ] || fail "uris" || return 1
  # -q prints the JSON too (it is what was asked for); the exit status is the verdict's
  expect 0 "$DL" status -q --json --servers "$URIS3" "$k" && jvalid "$D/out" || return 1
  # One node hung: its entry says error, the verdict stands on the two others.
  local p3; p3=$(echo "$URIS3" | sed 's/.*://')
  STOPPED_PID=$(cat "$TMP/redis3/redis-$p3.pid"); kill -STOP "$STOPPED_PID"
  expect 0 "$DL" status --json --servers "$URIS3" --timeout 300ms --connect-timeout 300ms "$k" && jvalid "$D/out" || return 1
  [ "$(jget "$D/out" '(d["verdict"], d["answered"], d["nodes"][2]["state"], "127.0.0.1:'"$p3"'" in d["nodes"][2]["error"])')" \
    = "('held', 2, 'error', True)" ] || fail "hung node: $(cat "$D/out")" || return 1
  kill -CONT "$STOPPED_PID"; STOPPED_PID=""
  touch "$D/release"; wait_exit "$HOLDER" 10 || return 1
  # A key of another type: taken, not held; any bytes in a token stay valid JSON.
  rcli hset "$k:h" f v >/dev/null
  expect 1 "$DL" status --json "$k:h" && jvalid "$D/out" || return 1
  [ "$(jget "$D/out" '(d["verdict"], d["nodes"][0]["state"])')" = "('not_held', 'taken')" ] || fail "taken: $(cat "$D/out")" || return 1
  rcli set "$k:b" "$(printf 'a\001"b\\c')" >/dev/null
  expect 0 "$DL" status --json "$k:b" && jvalid "$D/out" || return 1
  [ "$(jget "$D/out" 'd["token"] == "a\x01\"b\\c" and d["ttl_ms"] == -1')" = True ] || fail "bytes: $(cat "$D/out")" || return 1
  expect 64 "$DL" status --json || return 1
}

# Owner metadata: --owner-label stores who holds the lock
# in {KEY}:owner with the lock's TTL; status shows it (text and --json),
# null when the holder stored none; the release deletes it. JSON strings
# carry one \u00XX per byte (list.c), so the label's bytes are latin-1 there.
t_status_owner() {
  local k=cli:owner:$RANDOM label
  label=$(printf 'job "42"\\x\001 caf\303\251')
  expect 1 "$DL" status --json "$k" && jvalid "$D/out" || return 1
  [ "$(jget "$D/out" 'd["owner"]')" = None ] || fail "free: $(cat "$D/out")" || return 1
  hold_on_every_node "$k" "$(echo "$URIS3" | tr ',' '\n' | sed 's/.*://')" --servers "$URIS3" --ttl 20s --owner-label "$label" || return 1
  local p1; p1=$(echo "$URIS3" | sed 's/,.*//; s/.*://')
  [ "$(redis-cli -p "$p1" hget "{$k}:owner" token)" = "$(cat "$D/ready")" ] || fail "no owner hash" || return 1
  expect 0 "$DL" status --servers "$URIS3" "$k" || return 1
  contains "$D/out" "^owner: host $(hostname) pid $HOLDER program distlock since 20[0-9-]*T[0-9:]*Z label " || return 1
  grep -qF 'label job\x20"42"\\x\x01\x20caf\xc3\xa9' "$D/out" || fail "label not escaped: $(cat "$D/out")" || return 1
  expect 0 "$DL" status --json --servers "$URIS3" "$k" && jvalid "$D/out" || return 1
  [ "$(jget "$D/out" '(d["owner"]["host"], d["owner"]["pid"], d["owner"]["program"], d["owner"]["label"].encode("latin-1") == __import__("os").fsencode(sys.argv[3]))' "$label")" \
    = "('$(hostname)', $HOLDER, 'distlock', True)" ] || fail "owner: $(cat "$D/out")" || return 1
  [ "$(jget "$D/out" '0 < d["owner"]["ttl_ms"] <= 20000 and abs(d["owner"]["since_ms"] / 1000 - __import__("time").time()) < 60')" = True ] \
    || fail "owner ttl/since: $(cat "$D/out")" || return 1
  touch "$D/release"; wait_exit "$HOLDER" 10 || return 1
  # the release returned once a quorum deleted the lock and its record:
  # node 1's delete may still be on its way (bounded wait)
  wait_until 3 "[ \"\$(redis-cli -p '$p1' exists '{$k}:owner')\" = 0 ]" ||
    fail "owner hash left after release" || return 1
  # held without the option, or by a foreign token: no owner
  rcli set "$k" "php:12345" px 60000 nx >/dev/null
  expect 0 "$DL" status --json "$k" && jvalid "$D/out" || return 1
  [ "$(jget "$D/out" '(d["held"], d["owner"])')" = "(True, None)" ] || fail "foreign: $(cat "$D/out")" || return 1
  expect 0 "$DL" status "$k" && ! grep -q "^owner:" "$D/out" || fail "owner line for a foreign lock" || return 1
  rcli del "$k" >/dev/null
  # a label over 256 bytes: a clear usage error, nothing locked
  expect 64 "$DL" run --owner-label "$(head -c 257 /dev/zero | tr '\0' x)" "$k" -- true || return 1
  contains "$D/err" "at most 256" || return 1
  [ "$(rcli exists "$k")" = 0 ] || fail "locked despite the bad label"
}

# list PATTERN: SCAN in COUNT-bounded steps, never KEYS; on a
# keyspace of 100,000 unrelated keys it finds the locks within a budget, the
# server never runs one long command, --limit bounds what is listed.
t_list_bounded_on_big_keyspace() {
  local p; p=$(bash "$HARNESS" start "$D/redis" 1) || return 1
  local r="redis-cli -p $p" srv=redis://127.0.0.1:$p i
  [ "$($r DEBUG POPULATE 100000 unrelated 16)" = OK ] || fail "populate" || return 1
  for i in $(seq 1 20); do echo "SET lk:$i tok$i PX 60000"; done | $r >/dev/null
  hold lk:fenced --servers "$srv" --fence --ttl 30s || return 1
  [ "$($r exists '{lk:fenced}:fence')" = 1 ] || fail "no fence counter" || return 1
  $r CONFIG SET slowlog-log-slower-than 20000 >/dev/null; $r SLOWLOG RESET >/dev/null
  $r CONFIG RESETSTAT >/dev/null
  local t0; t0=$(date +%s%N)
  expect 0 "$DL" list --json --servers "$srv" 'lk:*' && jvalid "$D/out" || return 1
  local ms; ms=$(since_ms "$t0")
  echo "    list 'lk:*' among $($r dbsize) keys: ${ms} ms, $($r info commandstats | grep -o 'cmdstat_scan:calls=[0-9]*') (COUNT 1000)" >&2
  [ "$ms" -lt 5000 ] || fail "list took ${ms} ms" || return 1
  [ "$(jget "$D/out" '(len(d["locks"]), d["truncated"], d["complete"], d["pattern"])')" = "(21, False, True, 'lk:*')" ] \
    || fail "locks: $(head -c 600 "$D/out")" || return 1
  [ "$(jget "$D/out" 'sorted(l["key"] for l in d["locks"]) == [l["key"] for l in d["locks"]] and all(l["held"] and 0 < l["nodes"][0]["ttl_ms"] <= 60000 for l in d["locks"])')" = True ] \
    || fail "entries: $(head -c 600 "$D/out")" || return 1
  [ "$(jget "$D/out" '[(l["token"], l["fence"]) for l in d["locks"] if l["key"] == "lk:fenced"] == [(open("'"$D"'/ready").read().strip(), int("'"$($r get '{lk:fenced}:fence')"'"))]')" = True ] \
    || fail "fenced lock" || return 1
  # In steps: about dbsize/COUNT SCAN calls, no KEYS, and no command the slow log saw.
  local calls; calls=$($r info commandstats | sed -n 's/^cmdstat_scan:calls=\([0-9]*\),.*/\1/p')
  [ "${calls:-0}" -ge 90 ] || fail "only ${calls:-0} SCAN calls for 100k keys" || return 1
  ! $r info commandstats | grep -q '^cmdstat_keys:' || fail "KEYS was used" || return 1
  [ "$($r SLOWLOG LEN)" = 0 ] || fail "slow log: $($r SLOWLOG GET 5 | tr '\n' ' ')" || return 1
  # --limit bounds the listing and says so.
  expect 0 "$DL" list --json --limit 5 --servers "$srv" 'lk:*' && jvalid "$D/out" || return 1
  [ "$(jget "$D/out" '(len(d["locks"]), d["truncated"], d["complete"])')" = "(5, True, False)" ] || fail "limit: $(cat "$D/out")" || return 1
  expect 0 "$DL" list --limit 5 --servers "$srv" 'lk:*' || return 1
  [ "$(wc -l <"$D/out")" = 5 ] && contains "$D/err" "stopped at --limit 5" || return 1
  contains "$D/out" "^lk:[0-9]*  lock  held  1/1  [0-9.]*s  token tok[0-9]*  \[[0-9.]*s\]$" || return 1
  # Nothing matches: an empty list, exit 0.
  expect 0 "$DL" list --json --servers "$srv" 'nomatch:*' && jvalid "$D/out" || return 1
  [ "$(jget "$D/out" 'd["locks"]')" = "[]" ] || return 1
  # A node that cannot be scanned: 69, named, and the others' locks still listed.
  expect 69 "$DL" list --servers "$srv,redis://127.0.0.1:1" --connect-timeout 300ms 'lk:1*' || return 1
  contains "$D/err" "cannot scan redis://127.0.0.1:1" && contains "$D/out" "^lk:10 " || return 1
  expect 64 "$DL" list || return 1
  expect 64 "$DL" list --limit 0 'x*' && contains "$D/err" "invalid --limit '0'" || return 1
  expect 64 "$DL" list 'a' 'b' || return 1
}

# A redis-cluster:// list (3 masters + 3 replicas): the command runs under a
# lock on the key's master; `status` names the key's slot and master.
t_cluster() {
  local uri k=cli:cluster:$RANDOM
  uri=$(bash "$HARNESS" cluster "$D/cluster") || return 1
  local p0=${uri#redis-cluster://127.0.0.1:}; p0=${p0%%,*}
  local slot; slot=$(redis-cli -p "$p0" cluster keyslot "$k")
  expect 0 "$DL" run --servers "$uri" "$k" -- \
    sh -c 'redis-cli -c -p '"$p0"' get "$DISTLOCK_KEY" > "$0/seen"' "$D" || return 1
  [ -s "$D/seen" ] || fail "the key was not on the cluster while the command ran" || return 1
  hold "$k" --servers "$uri" --ttl 20s || return 1
  expect 0 "$DL" status --servers "$uri" "$k" || return 1
  contains "$D/out" "held by $(cat "$D/ready")" || return 1
  contains "$D/out" "slot $slot, master 127.0.0.1:[0-9]*" || return 1
  # that master has the key (another would answer MOVED)
  local mp; mp=$(sed -n 's/.*slot [0-9]*, master 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$D/out")
  [ "$(redis-cli -p "$mp" get "$k")" = "$(cat "$D/ready")" ] || fail "not on the master shown" || return 1
  # status --json: the same slot and master in the cluster node's object
  expect 0 "$DL" status --json --servers "$uri" "$k" && jvalid "$D/out" || return 1
  [ "$(jget "$D/out" 'd["nodes"][0]["slot"]')" = "$slot" ] || fail "json slot: $(cat "$D/out")" || return 1
  [ "$(jget "$D/out" 'd["nodes"][0]["master"]')" = "127.0.0.1:$mp" ] || fail "json master: $(cat "$D/out")" || return 1
  [ "$(jget "$D/out" 'd["nodes"][0]["token"]')" = "$(cat "$D/ready")" ] || return 1
  # a mixed list: only the cluster node has them (the plain one does not hold
  # the key: 1 of 2, not held)
  local plain=${URIS3%%,*}
  expect 1 "$DL" status --json --servers "$uri,$plain" "$k" && jvalid "$D/out" || return 1
  [ "$(jget "$D/out" 'd["nodes"][0]["master"]')" = "127.0.0.1:$mp" ] || fail "json master: $(cat "$D/out")" || return 1
  [ "$(jget "$D/out" '"slot" in d["nodes"][1] or "master" in d["nodes"][1]')" = False ] \
    || fail "a plain node has slot/master: $(cat "$D/out")" || return 1
  touch "$D/release"; wait_exit "$HOLDER" 10
  bash "$HARNESS" stop "$D/cluster"
}

# distlock under timeout(1) -k: at the time limit timeout sends TERM to
# distlock (forwarded; this command ignores it, which the README allows: the
# lock is held "until the command has really exited"), and after -k SIGKILL
# to timeout's own process group. distlock is in that group; since the command
# got a group of its own it is not, so only distlock dies; the command, set
# to get SIGKILL when distlock dies (PR_SET_PDEATHSIG), must not run on while
# its lease runs out (--ttl 1s).
t_command_does_not_run_on_after_timeout_kills_distlock() {
  local k=cli:timeoutk:$RANDOM
  timeout -k 0.5 1 "$DL" run --ttl 1s "$k" -- sh -c '
    trap "" TERM
    echo $$ > "$0/cmd.tmp" && mv "$0/cmd.tmp" "$0/cmd"
    while [ ! -e "$0/release" ]; do sleep 0.02; done' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -s '$D/cmd' ]" || return 1
  local cmd; cmd=$(cat "$D/cmd"); track "$cmd"
  wait_exit "$pid" 10 || return 1
  echo "    timeout exited $ST" >&2
  # the lease runs out on the server (nobody renews it)
  wait_until 5 "[ \"\$(rcli exists '$k')\" = 0 ]" || return 1
  wait_until 3 "! alive $cmd" ||
    fail "the command (pid $cmd) still runs after distlock was killed and key '$k' expired: $(grep -v '^  ' "$D/run.err")"
}

# A command that exits normally but leaves work running in its process group
# (a script's '&' child): flock(1)'s lock lasts while any inheritor of the
# descriptor lives, so distlock holds (and renews) the lock until the
# command's process group is empty, then releases it and exits with the
# command's status. Here the worker outlives the TTL three times over
# (workload), reads the key, and waits for $D/release.
t_lock_is_not_released_while_the_commands_group_runs_on() {
  local k=cli:leftover:$RANDOM
  "$DL" run --ttl 1s "$k" -- sh -c '
    echo "$DISTLOCK_TOKEN" > "$0/token"
    sh -c "echo \$\$ > \"\$0/worker.tmp\" && mv \"\$0/worker.tmp\" \"\$0/worker\"
           sleep 3
           redis-cli -p \"\$REDIS_PORT\" get \"\$DISTLOCK_KEY\" > \"\$0/after\"
           while [ ! -e \"\$0/release\" ]; do sleep 0.02; done" "$0" &
    while [ ! -s "$0/worker" ]; do sleep 0.02; done
    exit 3' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -s '$D/worker' ]" || return 1
  local worker; worker=$(cat "$D/worker"); track "$worker"
  # the command has exited (distlock says so) while the worker runs on
  wait_until 10 "grep -q 'the command exited; holding' '$D/run.err' || ! alive $pid" || return 1
  wait_until 10 "[ -s '$D/after' ] || ! alive $pid" || return 1
  alive "$pid" || fail "distlock exited while the command's worker (pid $worker) still runs: $(cat "$D/run.err")" || return 1
  [ "$(cat "$D/after")" = "$(cat "$D/token")" ] ||
    fail "3 TTLs after the command exited, with its worker running, redis holds '$(cat "$D/after")', not our token" || return 1
  expect 75 "$DL" run "$k" -- true || return 1
  touch "$D/release"
  wait_exit "$pid" 10 || return 1
  [ "$ST" = 3 ] || fail "exit $ST, expected the command's 3: $(cat "$D/run.err")" || return 1
  [ "$(rcli exists "$k")" = 0 ] || fail "not released once the group was empty"
}

# in_pty SHELL SCRIPT ARGS...: run SHELL -c SCRIPT ARGS as the session leader
# of a new pseudo-terminal (its controlling terminal, its group in the
# foreground, as a login shell's); type "hello" into the terminal after
# 1.5 s; the terminal's output into $D/pty.out, until "got hello" appears,
# the shell exits, or 8 s pass.
in_pty() {
  python3 - "$D/pty.out" "$@" <<'PY'
import os, pty, select, sys, time
out_path, shell, script, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(shell, [shell, "-c", script, shell] + args)
out, t0, sent = b"", time.time(), False
while time.time() - t0 < 8 and b"got hello" not in out:
    if select.select([fd], [], [], 0.1)[0]:
        try:
            b = os.read(fd, 1024)
        except OSError:
            break
        if not b:
            break
        out += b
    if not sent and time.time() - t0 > 1.5:
        os.write(fd, b"hello\n")
        sent = True
    if os.waitpid(pid, os.WNOHANG)[0]:
        while select.select([fd], [], [], 0.2)[0]:  # what it wrote before exiting
            try:
                b = os.read(fd, 1024)
            except OSError:
                break
            if not b:
                break
            out += b
        break
open(out_path, "wb").write(out)
try:
    os.kill(pid, 9)
except OSError:
    pass
PY
}
# track_cmd_and_distlock: the command's pid (in $D/cmd) and its parent's.
track_cmd_and_distlock() {
  [ -s "$D/cmd" ] || return 0
  local c; c=$(cat "$D/cmd"); track "$c"
  alive "$c" && echo "    the command (pid $c) is in state $(sed 's/.*) //' /proc/$c/stat | cut -d' ' -f1)" >&2
  local pp; pp=$(sed 's/.*) //' "/proc/$c/stat" 2>/dev/null | cut -d' ' -f2)
  [ -n "$pp" ] && [ "$pp" != 1 ] && track "$pp"
  return 0
}

# distlock in a pipeline at the terminal (`list | distlock run ...`): its
# stdin is a pipe, but it has a controlling terminal (/dev/tty) and is in the
# foreground, so the command's process group gets the terminal and a command
# that reads the terminal itself (as sudo or ssh do for a password) reads it,
# rather than being stopped by SIGTTIN while distlock holds the lock forever.
t_command_in_a_pipeline_reads_the_terminal() {
  local k=cli:ptypipe:$RANDOM
  in_pty sh 'echo | "$1" run "$2" -- sh -c "echo \$\$ > \"\$0/cmd\"; read x </dev/tty; echo got \$x" "$3"; echo "exit $?"' \
    "$DL" "$k" "$D"
  track_cmd_and_distlock || true
  grep -q "got hello" "$D/pty.out" ||
    fail "the command never read the terminal in 8 s (terminal: $(tr -d '\r' <"$D/pty.out" | tr '\n' '|'); key '$k' exists: $(rcli exists "$k"))"
}

# `distlock run ... &` at an interactive shell, then `fg`: the command reads
# the terminal. distlock started in the background gives the command no
# terminal; its read stops it (SIGTTIN) and it stays stopped (the lock
# renewed) until `fg` gives the terminal to distlock's group, which distlock
# passes on to the command's group, continuing it.
t_background_run_brought_to_the_foreground_reads_the_terminal() {
  local k=cli:ptybg:$RANDOM
  in_pty bash 'set -m; "$1" run "$2" -- sh -c "echo \$\$ > \"\$0/cmd\"; read x </dev/tty; echo got \$x" "$3" & sleep 0.5; fg; echo "exit $?"' \
    "$DL" "$k" "$D"
  track_cmd_and_distlock || true
  grep -q "got hello" "$D/pty.out" ||
    fail "after fg the command never read the terminal in 8 s (terminal: $(tr -d '\r' <"$D/pty.out" | tr '\n' '|'); key '$k' exists: $(rcli exists "$k"))"
}

# One node of three freezes while the command runs (--ttl 1s, the default
# --timeout 500ms): the two others confirm each renewal at once, a quorum,
# long before the lease's validity ends. "One hung node of three still
# leaves a quorum" (README, exit 69), and a lock is lost only when it is gone
# or its validity ended before a renewal was confirmed. But each renewal
# round waits for the frozen node until --timeout, the next renewal is
# sent only after that, and the lease clock calls the lock lost and the
# command is stopped (79), while a quorum holds the key with our token.
t_one_frozen_node_of_three_does_not_stop_a_running_command() {
  local k=cli:frozenrun:$RANDOM uris
  start_proxy || return 1
  uris=$(proxy_uris 0 1 2)
  "$DL" run --servers "$uris" --ttl 1s "$k" -- sh -c '
    touch "$0/started"
    i=0; while [ $i -lt 60 ]; do sleep 0.05; i=$((i + 1)); done' "$D" 2>"$D/run.err" &
  local pid=$!; track "$pid"
  wait_until 10 "[ -e '$D/started' ]" || return 1
  fpctl hold 2 || return 1
  wait_exit "$pid" 30 || return 1
  [ "$ST" = 0 ] ||
    fail "exit $ST with node 2 of 3 frozen and the two others answering: $(grep -v '^  ' "$D/run.err")"
}

# A command that makes itself a new session (setsid) leaves the group that
# --on-lost signals: recorded as the README's limit (signals reach the
# command's group), not a promise.

# ------------------------------------------------------ semaphores, read
# locks, several keys (run -n N, run --shared, run K1 K2 -- CMD)

# holdn NAME ARGS...: a background `distlock run ARGS -- CMD` (ARGS: its
# options and keys) whose command writes its token to $D/NAME.ready, then
# runs until $D/NAME.release exists. Its pid in $D/NAME.pid.
holdn() {
  local name=$1; shift
  "$DL" run "$@" -- sh -c '
    echo "$DISTLOCK_TOKEN" > "$0/$1.tmp" && mv "$0/$1.tmp" "$0/$1.ready"
    while [ ! -e "$0/$1.release" ] && [ ! -e "$0/release" ]; do sleep 0.02; done' \
    "$D" "$name" 2>"$D/$name.err" &
  echo $! >"$D/$name.pid"
  track $!
  wait_until 10 "[ -s '$D/$name.ready' ]" || { cat "$D/$name.err" >&2; return 1; }
}
# unhold NAME: let it release, and wait for it (its status in $ST).
unhold() {
  touch "$D/$1.release"
  wait_exit "$(cat "$D/$1.pid")" 20
}

# The command every contending run below executes: it marks itself inside
# ($D/in/KEY.PID for each key of $DISTLOCK_KEY_1.. or $DISTLOCK_KEY), counts
# who else is inside on the same key, records each count in $D/seen.KEY
# and a count above LIMIT in $D/over, stays (at least 100 ms) until STAY
# holders are inside its first key or every other run has finished (a
# bounded loop of 5 s), counts again, then leaves and marks itself done.
# Args: D LIMIT STAY RUNS
INSIDE='D=$0 LIMIT=$1 STAY=$2 RUNS=$3
keys=$DISTLOCK_KEY
if [ -n "${DISTLOCK_KEY_COUNT:-}" ]; then
  keys=; i=1
  while [ $i -le "$DISTLOCK_KEY_COUNT" ]; do eval "keys=\"\$keys \$DISTLOCK_KEY_$i\""; i=$((i + 1)); done
fi
count() { n=0; for f in "$D/in/$1".*; do [ -e "$f" ] && n=$((n + 1)); done; echo $n; }
for k in $keys; do touch "$D/in/$k.$$"; done
for k in $keys; do
  n=$(count "$k"); echo "$n" >> "$D/seen.$k"
  [ "$n" -le "$LIMIT" ] || echo "$k: $n inside" >> "$D/over"
done
i=0
while [ $i -lt 250 ]; do
  [ $i -ge 5 ] && [ "$(count "$DISTLOCK_KEY")" -ge "$STAY" ] && break
  done_runs=0; for f in "$D"/done.*; do [ -e "$f" ] && done_runs=$((done_runs + 1)); done
  [ $done_runs -ge $((RUNS - 1)) ] && break
  sleep 0.02; i=$((i + 1))
done
for k in $keys; do
  n=$(count "$k"); echo "$n" >> "$D/seen.$k"
  [ "$n" -le "$LIMIT" ] || echo "$k: $n inside" >> "$D/over"
done
for k in $keys; do rm -f "$D/in/$k.$$"; done
touch "$D/done.$$"'

# max_seen KEY: the largest count of holders inside KEY that any saw.
max_seen() { sort -n "$D/seen.$1" | tail -1; }

# -n 2: five runs contend (each waits); never three inside at once, and two
# are inside together (the semaphore admits two, not one). On 1 node and
# on 3 (a permit needs all three there: floor(3*2/3)+1).
t_semaphore_two_permits_never_three_inside() {
  local srv k i p pids
  for srv in "$DISTLOCK_SERVERS" "$URIS3"; do
    k=cli-sem-$RANDOM
    rm -rf "$D/in" "$D"/seen.* "$D"/done.* "$D/over"; mkdir -p "$D/in"
    pids=""
    for i in 1 2 3 4 5; do
      "$DL" run --servers "$srv" -n 2 --ttl 10s --wait 60s "$k" -- sh -c "$INSIDE" "$D" 2 2 5 \
        2>"$D/sem.$i.err" &
      pids="$pids $!"; track $!
    done
    for i in $pids; do
      wait_exit "$i" 90 || return 1
      [ "$ST" = 0 ] || fail "a run exited $ST: $(cat "$D"/sem.*.err)" || return 1
    done
    [ ! -e "$D/over" ] || fail "more than 2 inside ($srv): $(cat "$D/over")" || return 1
    [ "$(max_seen "$k")" = 2 ] || fail "never 2 inside together ($srv): max $(max_seen "$k")" || return 1
    [ "$(ls "$D"/done.* | wc -l)" = 5 ] || fail "not every command ran" || return 1
    echo "    $srv: max $(max_seen "$k") inside with -n 2, 5 runs" >&2
    # Gone from every node of $srv: each run's release returned once enough
    # nodes answered, the last node's may still be on its way (bounded wait).
    for p in $(echo "$srv" | tr ',' '\n' | sed 's/.*://'); do
      wait_until 3 "[ \"\$(redis-cli -p '$p' exists '$k')\" = 0 ]" ||
        fail "semaphore key left behind on port $p ($srv)" || return 1
    done
  done
}

# A permit's run gets $DISTLOCK_PERMITS; all taken is "held elsewhere" (75),
# the command not run, the message says the permits are taken.
t_semaphore_all_permits_taken_is_a_conflict() {
  local k=cli-semfull-$RANDOM
  holdn a -n 2 "$k" || return 1
  holdn b -n 2 "$k" || return 1
  expect 75 "$DL" run -n 2 "$k" -- touch "$D/ran" || return 1
  contains "$D/err" "all 2 permits of the semaphore '$k' are taken; not running the command" || return 1
  # --nonblock (no short form: -n is the permits) overrides an earlier --wait.
  expect 75 "$DL" run --wait 30s --nonblock -n 2 "$k" -- touch "$D/ran" || return 1
  absent "$D/ran" || return 1
  [ "$(rcli zcard "$k")" = 3 ] || fail "zset: $(rcli zrange "$k" 0 -1 withscores | tr '\n' ' ')" || return 1
  unhold a || return 1
  expect 0 "$DL" run -n 2 "$k" -- sh -c 'echo "$DISTLOCK_PERMITS $DISTLOCK_KEY" > "$0/env"' "$D" || return 1
  [ "$(cat "$D/env")" = "2 $k" ] || fail "env: $(cat "$D/env")"
}

# A waiting run gets the permit a release frees, at once (not at the TTL).
t_semaphore_wait_wakes_on_release() {
  local k=cli-semwait-$RANDOM
  holdn a -n 1 --ttl 30s "$k" || return 1
  "$DL" run -v -n 1 --wait 20s "$k" -- sh -c 'date +%s%N > "$0/got"' "$D" 2>"$D/waiter.err" &
  local waiter=$!; track "$waiter"
  wait_until 10 "grep -q 'waiting up to' '$D/waiter.err' 2>/dev/null" || return 1
  local t_rel; t_rel=$(date +%s%N)
  unhold a || return 1
  wait_exit "$waiter" 20 || return 1
  [ "$ST" = 0 ] || fail "waiter exited $ST: $(cat "$D/waiter.err")" || return 1
  local lat=$(( ($(cat "$D/got") - t_rel) / 1000000 ))
  echo "    waiter ran ${lat} ms after the holder was told to release" >&2
  [ "$lat" -lt 3000 ] || fail "waiter took ${lat} ms after the release (ttl 30s)"
}

# A SIGKILLed run's permit comes back when its TTL ends, not before.
t_killed_runs_permit_comes_back_after_the_ttl() {
  local k=cli-semkill-$RANDOM
  holdn live -n 2 --ttl 30s "$k" || return 1
  holdn dead -n 2 --ttl 2s "$k" || return 1
  local t_kill; t_kill=$(date +%s%N)
  kill -9 "$(cat "$D/dead.pid")"
  wait_exit "$(cat "$D/dead.pid")" 10 || return 1
  # Both permits still taken: the dead run's lease has not ended.
  expect 75 "$DL" run -n 2 "$k" -- touch "$D/ran" || return 1
  absent "$D/ran" || return 1
  expect 0 "$DL" run -n 2 --wait 20s "$k" -- touch "$D/ran" || return 1
  local ms; ms=$(since_ms "$t_kill")
  echo "    the killed run's permit came back ${ms} ms after SIGKILL (ttl 2s)" >&2
  [ -e "$D/ran" ] || fail "command not run" || return 1
  [ "$ms" -ge 1000 ] || fail "permit back ${ms} ms after the kill, before its ttl" || return 1
  [ "$ms" -lt 8000 ] || fail "permit back only ${ms} ms after the kill with --ttl 2s" || return 1
  unhold live
}

# --shared: readers overlap; a plain run (a writer) is refused while they
# hold it, and a reader while a writer holds it. On 1 and on 3 nodes.
t_shared_runs_overlap_and_a_plain_run_excludes_them() {
  local srv k
  for srv in "$DISTLOCK_SERVERS" "$URIS3"; do
    k=cli-shared-$RANDOM
    rm -f "$D"/*.ready "$D"/*.release "$D/ran"
    holdn r1 --servers "$srv" --shared "$k" || return 1
    # A second reader runs while the first holds it.
    expect 0 "$DL" run --servers "$srv" --shared "$k" -- sh -c '
      [ -s "$0/r1.ready" ] && [ ! -e "$0/r1.release" ] && touch "$0/overlap"' "$D" || return 1
    [ -e "$D/overlap" ] || fail "the second reader did not run alongside the first ($srv)" || return 1
    rm -f "$D/overlap"
    expect 75 "$DL" run --servers "$srv" "$k" -- touch "$D/ran" || return 1
    contains "$D/err" "'$k' is locked by another owner (1 read lock); not running the command" || return 1
    absent "$D/ran" || return 1
    unhold r1 || return 1
    [ "$ST" = 0 ] || fail "reader exited $ST: $(cat "$D/r1.err")" || return 1
    holdn w --servers "$srv" "$k" || return 1
    expect 75 "$DL" run --servers "$srv" --shared "$k" -- touch "$D/ran" || return 1
    contains "$D/err" "'$k' is locked for writing by another owner, or a writer waits for it (it expires in" || return 1
    absent "$D/ran" || return 1
    unhold w || return 1
    expect 0 "$DL" run --servers "$srv" --shared "$k" -- touch "$D/ran" || return 1
    [ -e "$D/ran" ] || fail "reader did not run once the writer left ($srv)"
    rm -f "$D/ran"
  done
}

# A writer waiting behind a reader (--wait) keeps new readers out: the
# reader that arrives after it is refused, and the writer runs once the
# first reader leaves; status shows the readers and the waiting writer.
t_shared_waiting_writer_is_not_starved() {
  local k=cli-writer-$RANDOM
  holdn r1 --shared --ttl 30s "$k" || return 1
  "$DL" run -v --wait 30s "$k" -- touch "$D/writer.ran" 2>"$D/writer.err" &
  local w=$!; track "$w"
  wait_until 10 "grep -q 'waiting up to' '$D/writer.err' 2>/dev/null" || return 1
  expect 75 "$DL" run --shared "$k" -- touch "$D/ran" || return 1
  absent "$D/ran" || return 1
  expect 0 "$DL" status "$k" || return 1
  contains "$D/out" "^$k: read locks: 1 reader, a writer waiting (1 of 1 node answered, quorum 1)$" || return 1
  expect 0 "$DL" status --json "$k" || return 1
  [ "$(jget "$D/out" '(d["kind"], d["holders"], d["writer"])')" = "('readers', 1, True)" ] ||
    fail "json with a writer waiting: $(cat "$D/out")" || return 1
  unhold r1 || return 1
  wait_exit "$w" 20 || return 1
  [ "$ST" = 0 ] && [ -e "$D/writer.ran" ] || fail "writer exit $ST: $(cat "$D/writer.err")"
}

# Several keys: all or none. A set with one key held elsewhere runs nothing
# and leaves none of its keys behind; the message names the held key. The
# command gets each key and, with --fence, each key's fence.
t_several_keys_all_or_none() {
  local a=cli-ma-$RANDOM b=cli-mb-$RANDOM c=cli-mc-$RANDOM
  holdn hb "$b" || return 1
  expect 75 "$DL" run "$a" "$b" "$c" -- touch "$D/ran" || return 1
  contains "$D/err" "one of the 3 keys is locked by another owner" || return 1
  contains "$D/err" "$b" || return 1
  absent "$D/ran" || return 1
  [ "$(rcli exists "$a" "$c")" = 0 ] || fail "a partial set was left behind" || return 1
  [ "$(rcli get "$b")" = "$(cat "$D/hb.ready")" ] || fail "the holder's key was touched" || return 1
  unhold hb || return 1
  # Counters that differ, so each key's fence is told from the others'.
  rcli set "{$a}:fence" 10 >/dev/null && rcli set "{$b}:fence" 41 >/dev/null
  expect 0 "$DL" run --fence "$a" "$b" "$c" -- sh -c '
    { echo "$DISTLOCK_KEY_COUNT $DISTLOCK_KEY"; echo "$DISTLOCK_KEY_1 $DISTLOCK_KEY_2 $DISTLOCK_KEY_3"
      echo "$DISTLOCK_FENCE_1 $DISTLOCK_FENCE_2 $DISTLOCK_FENCE_3"; echo "fence=${DISTLOCK_FENCE-unset}"
      for k in "$DISTLOCK_KEY_1" "$DISTLOCK_KEY_2" "$DISTLOCK_KEY_3"; do
        redis-cli -p "$REDIS_PORT" get "$k"; redis-cli -p "$REDIS_PORT" get "{$k}:fence"; done
      echo "$DISTLOCK_TOKEN"; } > "$0/env"' "$D" || return 1
  local tok; tok=$(sed -n 11p "$D/env")
  [ "$(sed -n 1,2p "$D/env" | tr '\n' ' ')" = "3 $a $a $b $c " ] || fail "keys: $(cat "$D/env")" || return 1
  [ "$(sed -n 3p "$D/env")" = "$(sed -n '6p;8p;10p' "$D/env" | tr '\n' ' ' | sed 's/ $//')" ] ||
    fail "fences are not the keys' counters: $(cat "$D/env")" || return 1
  [ "$(sed -n 3p "$D/env")" = "11 42 1" ] || fail "fences: $(sed -n 3p "$D/env")" || return 1
  [ "$(sed -n 4p "$D/env")" = "fence=unset" ] || fail "DISTLOCK_FENCE set for several keys" || return 1
  [ "$(sed -n '5p;7p;9p' "$D/env" | sort -u)" = "$tok" ] || fail "keys do not hold the run's token: $(cat "$D/env")" || return 1
  [ "$(rcli exists "$a" "$b" "$c")" = 0 ] || fail "not released"
}

# Overlapping sets run concurrently, each waiting: no key ever has two
# holders, and every run ends (no deadlock). On 1 and on 3 nodes. Every two
# of the sets share a key, so the runs are served one after the other: each
# stays inside for 5 turns of INSIDE's loop (STAY 1), as long as the others
# take to start and wait, not up to 250 turns until four are done (5 s each
# on an idle machine, 20 s on a loaded one, where the last served waited
# more than its 60 s).
t_several_keys_overlapping_sets_exclude_each_other() {
  local srv a b c i pids set
  for srv in "$DISTLOCK_SERVERS" "$URIS3"; do
    a=cli-oa-$RANDOM b=cli-ob-$RANDOM c=cli-oc-$RANDOM
    rm -rf "$D/in" "$D"/seen.* "$D"/done.* "$D/over"; mkdir -p "$D/in"
    pids=""; i=0
    local t0; t0=$(date +%s%N)
    for set in "$a $b" "$b $c" "$c $a" "$a $b $c" "$c $b"; do
      i=$((i + 1))
      # shellcheck disable=SC2086
      "$DL" run --servers "$srv" --ttl 10s --wait 120s $set -- sh -c "$INSIDE" "$D" 1 1 5 \
        2>"$D/m.$i.err" &
      pids="$pids $!"; track $!
    done
    for i in $pids; do
      wait_exit "$i" 150 || return 1
      [ "$ST" = 0 ] || fail "a run exited $ST: $(cat "$D"/m.*.err)" || return 1
    done
    echo "    $srv: the 5 overlapping sets were served in $(since_ms "$t0") ms" >&2
    [ ! -e "$D/over" ] || fail "a key had two holders ($srv): $(cat "$D/over")" || return 1
    [ "$(ls "$D"/done.* | wc -l)" = 5 ] || fail "not every command ran ($srv)" || return 1
    for k in "$a" "$b" "$c"; do
      [ "$(max_seen "$k")" = 1 ] || fail "$k: max $(max_seen "$k") ($srv)" || return 1
    done
  done
}

# A signal ends a wait for a permit or for several keys at once (128+N),
# the command never runs, and what others hold is left alone.
t_signal_ends_a_wait_for_a_permit_or_keys() {
  local k=cli-sigsem-$RANDOM a=cli-siga-$RANDOM b=cli-sigb-$RANDOM
  holdn sem -n 1 "$k" || return 1
  holdn key "$b" || return 1
  local args
  for args in "-n 1 $k" "$a $b"; do
    rm -f "$D/waiter.err"
    # shellcheck disable=SC2086
    "$DL" run -v --wait forever $args -- touch "$D/ran" 2>"$D/waiter.err" &
    local w=$!; track "$w"
    wait_until 10 "grep -q 'waiting for it' '$D/waiter.err' 2>/dev/null" || return 1
    local t0; t0=$(date +%s%N)
    kill -TERM "$w"
    wait_exit "$w" 5 || return 1
    [ "$ST" = 143 ] || fail "waiter ($args) exit $ST after SIGTERM, expected 143: $(cat "$D/waiter.err")" || return 1
    echo "    ($args) the wait ended $(since_ms "$t0") ms after SIGTERM" >&2
    absent "$D/ran" || return 1
  done
  [ "$(rcli zscore "$k" "$(cat "$D/sem.ready")")" != "" ] || fail "the holder's permit was disturbed" || return 1
  [ "$(rcli get "$b")" = "$(cat "$D/key.ready")" ] || fail "the holder's key was disturbed" || return 1
  [ "$(rcli exists "$a")" = 0 ] || fail "the waiter left '$a' held"
}

# A permit, a read lock or a set of keys lost while the command runs stops
# it (--on-lost term, exit 79) and says what was lost.
t_lost_permit_read_lock_or_keys_stops_the_command() {
  local k=cli-lostsem-$RANDOM r=cli-lostread-$RANDOM a=cli-losta-$RANDOM b=cli-lostb-$RANDOM
  holdn sem -n 2 --ttl 1s "$k" || return 1
  holdn read --shared --ttl 1s "$r" || return 1
  holdn keys --ttl 1s "$a" "$b" || return 1
  expect 0 "$DL" release --force "$k" || return 1
  expect 0 "$DL" release --force "$r" || return 1
  expect 0 "$DL" release --force "$b" || return 1
  local n
  for n in sem read keys; do
    wait_exit "$(cat "$D/$n.pid")" 10 || return 1
    [ "$ST" = 79 ] || fail "$n: exit $ST, expected 79: $(cat "$D/$n.err")" || return 1
  done
  contains "$D/sem.err" "lost a permit of the semaphore '$k' while the command was running" || return 1
  contains "$D/read.err" "lost the read lock on '$r' while the command was running" || return 1
  contains "$D/keys.err" "lost the locks on '$a' and '$b' while the command was running" || return 1
  # The set's other key is released too (its release ran at exit).
  [ "$(rcli exists "$a")" = 0 ] || fail "'$a' left held after the set was lost"
}

# A run inside a run of several keys (or a caller with stale values) does
# not pass the outer run's numbered variables on: each run's own only.
t_numbered_variables_are_each_runs_own() {
  local a=cli-enva-$RANDOM b=cli-envb-$RANDOM
  DISTLOCK_KEY_3=stale DISTLOCK_FENCE_2=stale DISTLOCK_KEY_COUNT=9 DISTLOCK_PERMITS=9 \
    expect 0 "$DL" run --fence "$a" "$b" -- "$DL" run "$a-inner" -- sh -c 'env > "$0/env"' "$D" || return 1
  ! grep -E '^DISTLOCK_(KEY_[0-9]+|FENCE(_[0-9]+)?|KEY_COUNT|PERMITS)=' "$D/env" ||
    fail "the inner run sees the outer run's variables" || return 1
  grep -qx "DISTLOCK_KEY=$a-inner" "$D/env" || fail "DISTLOCK_KEY: $(grep DISTLOCK_KEY= "$D/env")"
}

# Bad input: a clear message, exit 64, the command never run.
t_primitives_bad_input() {
  local k=cli-bad-$RANDOM ran=$D/ran
  expect 64 "$DL" run -n 0 "$k" -- touch "$ran" && contains "$D/err" "permits" || return 1
  expect 64 "$DL" run -n 1000001 "$k" -- touch "$ran" && contains "$D/err" "permits" || return 1
  expect 64 "$DL" run -n -3 "$k" -- touch "$ran" && contains "$D/err" "permits" || return 1
  expect 64 "$DL" run -n 99999999999999999999 "$k" -- touch "$ran" &&
    contains "$D/err" "invalid -n/--permits '99999999999999999999'" || return 1
  expect 64 "$DL" run -n two "$k" -- touch "$ran" && contains "$D/err" "invalid -n/--permits 'two'" || return 1
  expect 64 "$DL" run -n 2 "$k" "$k-2" -- touch "$ran" && contains "$D/err" "-n/--permits takes one KEY" || return 1
  expect 64 "$DL" run --shared "$k" "$k-2" -- touch "$ran" && contains "$D/err" "--shared takes one KEY" || return 1
  expect 64 "$DL" run --shared -n 2 "$k" -- touch "$ran" && contains "$D/err" "exclude each other" || return 1
  expect 64 "$DL" run "$k" "$k-2" "$k" -- touch "$ran" && contains "$D/err" "'$k' appears twice" || return 1
  expect 64 "$DL" run "$k" "" -- touch "$ran" || return 1
  expect 64 "$DL" run --fence -n 2 "$k" -- touch "$ran" || return 1
  expect 64 "$DL" run --fence --shared "$k" -- touch "$ran" || return 1
  expect 64 "$DL" run "$k" "$k-2" --ttl 5 -- touch "$ran" && contains "$D/err" "options go before KEY" || return 1
  absent "$ran" || return 1
  [ "$(rcli exists "$k" "$k-2")" = 0 ] || fail "bad input wrote a key"
}

# A key of the other kind: a clear error (69, the library's words), never a
# grant, never a crash.
t_key_of_another_kind_is_refused() {
  local k=cli-kind-$RANDOM ran=$D/ran
  holdn sem -n 2 "$k" || return 1
  expect 69 "$DL" run "$k" -- touch "$ran" && contains "$D/err" "semaphore" || return 1
  expect 69 "$DL" run --shared "$k" -- touch "$ran" && contains "$D/err" "semaphore" || return 1
  unhold sem || return 1
  holdn lock "$k" || return 1
  expect 69 "$DL" run -n 2 "$k" -- touch "$ran" && contains "$D/err" "holds a lock, not a semaphore" || return 1
  unhold lock || return 1
  absent "$ran"
}

# status shows a semaphore's permits held / P and a key's readers; --json
# has kind (each of the core's names), holders, permits; list shows each
# key's kind.
t_status_and_list_show_kinds() {
  local p=cli-kinds-$RANDOM
  holdn s1 -n 3 "$p:sem" || return 1
  holdn s2 -n 3 "$p:sem" || return 1
  holdn r1 --shared "$p:read" || return 1
  holdn r2 --shared "$p:read" || return 1
  holdn l1 "$p:lock" || return 1
  expect 0 "$DL" status "$p:sem" || return 1
  contains "$D/out" "^$p:sem: semaphore: 2 of 3 permits held (1 of 1 node answered, quorum 1)$" || return 1
  contains "$D/out" "  semaphore  2 of 3 permits held$" || return 1
  expect 0 "$DL" status "$p:read" || return 1
  contains "$D/out" "^$p:read: read locks: 2 readers (1 of 1 node answered, quorum 1)$" || return 1
  "$DL" status --json "$p:sem" >"$D/out" 2>"$D/err"
  jvalid "$D/out" || return 1
  [ "$(jget "$D/out" '(d["kind"], d["holders"], d["permits"], d["nodes"][0]["kind"])')" = "('semaphore', 2, 3, 'semaphore')" ] ||
    fail "sem json: $(cat "$D/out")" || return 1
  "$DL" status --json "$p:read" >"$D/out" 2>"$D/err"
  [ "$(jget "$D/out" '(d["kind"], d["holders"], d["writer"])')" = "('readers', 2, False)" ] || fail "read json: $(cat "$D/out")" || return 1
  expect 0 "$DL" status --json "$p:lock" || return 1
  [ "$(jget "$D/out" 'd["kind"]')" = lock ] || fail "lock json: $(cat "$D/out")" || return 1
  # the two kinds left: nothing there, and a value of another type
  expect 1 "$DL" status --json "$p:free" || return 1
  [ "$(jget "$D/out" '(d["kind"], d["nodes"][0]["kind"])')" = "('free', 'free')" ] ||
    fail "free json: $(cat "$D/out")" || return 1
  rcli hset "$p:hash" f v >/dev/null
  expect 1 "$DL" status --json "$p:hash" || return 1
  [ "$(jget "$D/out" '(d["kind"], d["nodes"][0]["kind"])')" = "('other', 'other')" ] ||
    fail "other json: $(cat "$D/out")" || return 1
  expect 0 "$DL" list "$p:*" || return 1
  contains "$D/out" "^$p:lock  lock  held" || return 1
  contains "$D/out" "^$p:sem  semaphore  2/3 permits  \[2/3\]$" || return 1
  contains "$D/out" "^$p:read  readers  2 readers  \[2\]$" || return 1
  # Once released: a free semaphore is "not held" (exit 1).
  unhold s1 && unhold s2 || return 1
  expect 1 "$DL" status "$p:sem" || return 1
}

# ------------------------------------------------------------------ runner
ALL=$(declare -F | awk '{print $3}' | grep '^t_')
[ $# -gt 0 ] && ALL="$*"
passed=0; failed=0; failed_names=""
for t in $ALL; do
  D=$TMP/$t; mkdir -p "$D"
  # set -e: any assertion that fails ends the test (they all return 1).
  ( set -e; trap test_cleanup EXIT; "$t" )
  if [ $? -eq 0 ]; then
    echo "ok   - $t"; passed=$((passed + 1))
  else
    echo "FAIL - $t"; failed=$((failed + 1)); failed_names="$failed_names $t"
  fi
done
[ -n "$failed_names" ] && echo "failed:$failed_names"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
