#!/usr/bin/env bash
# distlock quick-start demo (the README's first command):
#
#   bash scripts/demo.sh
#
# On a fresh Debian 12 machine: installs the Debian packages it needs
# (scripts/deps.sh), builds the C library and the distlock command (CMake),
# the PHP extension (php-ext/build.sh) and the Python package
# (python/build.sh, in a venv), starts one throwaway redis-server on a free
# loopback port, and shows that a lock taken from the command line, PHP or
# Python excludes the two others on the same key, that waiting works, and
# that a crashed holder's lock expires. Every step checks its result; a wrong
# one stops the demo with a non-zero status. The server and every process the
# demo started are stopped on exit.
#
# Build output goes to $DISTLOCK_DEMO_BUILD_DIR (default <repo>/build-demo),
# its log to build-demo/demo-build.log.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${DISTLOCK_DEMO_BUILD_DIR:-$REPO/build-demo}
KEY=demo:order-42
T0=$(date +%s%N)

say()  { printf '%s\n' "$*"; }
ok()   { printf '   ok  %s\n' "$*"; }
die()  { printf '\nDEMO FAILED: %s\n' "$*" >&2; exit 1; }
elapsed_ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
secs() { printf '%d.%d' $(( $1 / 1000 )) $(( $1 % 1000 / 100 )); }  # ms -> "1.2"

# --------------------------------------------------------------- cleanup
RUN=""
PIDS=()
cleanup() {
  local st=$?
  set +e
  if [ -n "$RUN" ]; then
    touch "$RUN/cli.release" "$RUN/php.release"   # holders still running end by themselves
    for p in "${PIDS[@]}"; do
      for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.02; done
      kill -9 "$p" 2>/dev/null
      wait "$p" 2>/dev/null
    done
    bash "$REPO/tests/harness/redis.sh" stop "$RUN/redis" >/dev/null 2>&1
    rm -rf "$RUN"
  fi
  exit $st
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Bounded wait for a condition.
wait_for() {
  local secs=$1; shift
  for ((i = 0; i < secs * 50; i++)); do
    if eval "$*"; then return 0; fi
    sleep 0.02
  done
  die "timed out after ${secs}s waiting for: $*"
}

# --------------------------------------------------------------- build
say "distlock quick-start demo"
say ""
mkdir -p "$B"
LOG=$B/demo-build.log
: >"$LOG"
build_step() { # label command...
  local label=$1; shift
  local t=$(date +%s%N)
  printf '   %-56s' "$label"
  if ! "$@" >>"$LOG" 2>&1; then
    printf 'FAILED\n'
    tail -n 30 "$LOG" >&2
    die "$label (full log: $LOG)"
  fi
  printf '%6ss ok\n' "$(secs "$(elapsed_ms "$t")")"
}
say "Setting up (the first run builds everything; later runs are quick)"
build_step "Debian packages (scripts/deps.sh)" bash "$REPO/scripts/deps.sh"
build_step "C library + distlock command (CMake)" \
  bash -c 'cmake -S "$1" -B "$2" -DDISTLOCK_BUILD_TESTS=OFF -DDISTLOCK_BUILD_CLI=ON &&
           cmake --build "$2" -j"$(nproc)" --target distlock_cli distlock_static' _ "$REPO" "$B"
DL=$B/cli/distlock
[ -x "$DL" ] || die "no $DL after the build"
build_step "PHP extension (php-ext/build.sh)" \
  bash -c 'bash "$1/php-ext/build.sh" --core-build "$2" --out "$2/php" > "$2/php-so-path"' _ "$REPO" "$B"
PHP_SO=$(tail -n 1 "$B/php-so-path")
[ -f "$PHP_SO" ] || die "php-ext/build.sh did not print the path of distlock.so"
build_step "Python package (python/build.sh, venv)" bash "$REPO/python/build.sh" "$B/venv"
PY=$B/venv/bin/python
"$PY" -c 'import distlock' 2>>"$LOG" || die "the venv cannot import distlock"

RUN=$(mktemp -d "${TMPDIR:-/tmp}/distlock-demo.XXXXXX")
PORT=$(bash "$REPO/tests/harness/redis.sh" start "$RUN/redis" 1) || die "could not start redis-server"
SERVERS=redis://127.0.0.1:$PORT
export DISTLOCK_SERVERS=$SERVERS
say "   throwaway redis-server on 127.0.0.1:$PORT (stopped when the demo ends)"
SETUP_MS=$(elapsed_ms "$T0")
T_DEMO=$(date +%s%N)
say ""

# --------------------------------------------------------------- the three front ends
php_dl() { php -n -d extension="$PHP_SO" -d distlock.servers="$SERVERS" "$@"; }

# PHP: the ERP code's distributedLock(); prints "ACQUIRED <token>" or
# "<code> <message>" (exit 3) when the key is held.
php_try() {
  php_dl -r '
    try {
      $t = distributedLock($argv[1], 10);
      echo "ACQUIRED $t\n";
      var_export(distributedUnlock($argv[1], $t)); echo "\n";
      exit(0);
    } catch (Exception $e) {
      echo $e->getCode(), " ", $e->getMessage(), "\n";
      exit(3);
    }' -- "$KEY"
}

# Python: acquire(blocking=False) like threading.Lock; prints True/False.
py_try() {
  "$PY" -c '
import sys, distlock
c = distlock.Client(sys.argv[1])
lock = c.lock(sys.argv[2], ttl=10)
got = lock.acquire(blocking=False)
print(got)
if got:
    lock.release()
c.close()' "$SERVERS" "$KEY"
}

key_value() { redis-cli -p "$PORT" get "$KEY"; }
key_exists() { redis-cli -p "$PORT" exists "$KEY"; }

expect_php_refused() {
  local out st=0
  out=$(php_try 2>&1) || st=$?
  [ "$st" = 3 ] && [ "${out%% *}" = 500002 ] || die "PHP was not refused with 500002 (exit $st): $out"
  ok "PHP    distributedLock('$KEY', 10) -> exception ${out%% *}"
  say "            \"${out#* }\""
}
expect_py_refused() {
  local out
  out=$(py_try 2>&1) || die "Python failed: $out"
  [ "$out" = False ] || die "Python acquire(blocking=False) returned '$out', expected False"
  ok "Python client.lock('$KEY').acquire(blocking=False) -> False"
}
expect_cli_refused() {
  local st=0
  "$DL" run "$KEY" -- touch "$RUN/cli-ran" 2>"$RUN/cli.err" || st=$?
  [ "$st" = 75 ] || die "distlock run exited $st, expected 75 (lock held elsewhere): $(cat "$RUN/cli.err")"
  [ ! -e "$RUN/cli-ran" ] || die "distlock ran its command although the key was held"
  ok "CLI    distlock run $KEY -- ...  -> exit 75, command not run"
  say "            $(cat "$RUN/cli.err")"
}

# --------------------------------------------------------------- 1. CLI holds
say "1. The command line holds $KEY; PHP and Python are refused"
say "   \$ distlock run $KEY -- <job>"
"$DL" run "$KEY" -- sh -c 'echo "$DISTLOCK_TOKEN" > "$0/cli.tmp" && mv "$0/cli.tmp" "$0/cli.ready"
  while [ ! -e "$0/cli.release" ]; do sleep 0.02; done' "$RUN" 2>"$RUN/cli-holder.err" &
HOLDER=$!; PIDS+=("$HOLDER")
wait_for 10 "[ -s '$RUN/cli.ready' ]"
TOKEN=$(cat "$RUN/cli.ready")
[ "$(key_value)" = "$TOKEN" ] || die "redis does not hold the CLI's token"
ok "CLI    holds it: redis has $KEY = $TOKEN"
expect_php_refused
expect_py_refused
touch "$RUN/cli.release"
st=0; wait "$HOLDER" || st=$?
[ "$st" = 0 ] || die "distlock run exited $st: $(cat "$RUN/cli-holder.err")"
[ "$(key_exists)" = 0 ] || die "the key is still there after the job ended"
ok "CLI    job ended -> distlock released the key, exit 0"
say ""

# --------------------------------------------------------------- 2. PHP holds
say "2. PHP holds it (distributedLock); the command line and Python are refused"
php_dl -r '
  $t = distributedLock($argv[1], 10);
  file_put_contents($argv[2] . "/php.tmp", $t); rename($argv[2] . "/php.tmp", $argv[2] . "/php.ready");
  while (!file_exists($argv[2] . "/php.release")) usleep(20000);
  file_put_contents($argv[2] . "/php.unlock", var_export(distributedUnlock($argv[1], $t), true));
' -- "$KEY" "$RUN" 2>"$RUN/php-holder.err" &
HOLDER=$!; PIDS+=("$HOLDER")
wait_for 10 "[ -s '$RUN/php.ready' ]"
TOKEN=$(cat "$RUN/php.ready")
[ "$(key_value)" = "$TOKEN" ] || die "redis does not hold PHP's token"
ok "PHP    holds it: redis has $KEY = $TOKEN"
expect_cli_refused
expect_py_refused
touch "$RUN/php.release"
st=0; wait "$HOLDER" || st=$?
[ "$st" = 0 ] || die "the PHP holder exited $st: $(cat "$RUN/php-holder.err")"
[ "$(cat "$RUN/php.unlock")" = true ] || die "distributedUnlock returned $(cat "$RUN/php.unlock")"
[ "$(key_exists)" = 0 ] || die "the key is still there after distributedUnlock"
ok "PHP    distributedUnlock() -> true; the key is gone"
say ""

# --------------------------------------------------------------- 3. waiting
say "3. Waiting: Python holds it for 1.5 s; 'distlock run --wait 10s' gets it when released"
"$PY" -c '
import os, sys, time, distlock
servers, key, d = sys.argv[1:4]
c = distlock.Client(servers)
with c.lock(key, ttl=10) as lock:
    open(d + "/py.tmp", "w").write(lock.token)
    os.rename(d + "/py.tmp", d + "/py.ready")
    time.sleep(1.5)                         # the work done under the lock
    # Stamped before the release starts: no one can hold the key before it.
    open(d + "/py.released", "w").write(str(time.time_ns()))
c.close()' "$SERVERS" "$KEY" "$RUN" 2>"$RUN/py-holder.err" &
HOLDER=$!; PIDS+=("$HOLDER")
wait_for 10 "[ -s '$RUN/py.ready' ]"
[ "$(key_value)" = "$(cat "$RUN/py.ready")" ] || die "redis does not hold Python's token"
ok "Python holds it (with client.lock('$KEY', ttl=10):)"
say "   \$ distlock run -v --wait 10s $KEY -- <job>"
st=0
"$DL" run -v --wait 10s "$KEY" -- sh -c 'date +%s%N > "$0/cli.started"' "$RUN" 2>"$RUN/cli-wait.err" || st=$?
sed 's/^/            /' "$RUN/cli-wait.err"
[ "$st" = 0 ] || die "the waiting distlock run exited $st"
st=0; wait "$HOLDER" || st=$?
[ "$st" = 0 ] || die "the Python holder exited $st: $(cat "$RUN/py-holder.err")"
REL=$(cat "$RUN/py.released"); START=$(cat "$RUN/cli.started")
GAP=$(( (START - REL) / 1000000 ))
# Python stamps the moment it starts releasing: the CLI's job must start
# after it (exclusion), and soon after (the release wakes the waiter; without
# that it would wait for the 10 s lease to run out).
[ "$GAP" -ge 0 ] || die "the CLI's job started ${GAP} ms before Python released: no exclusion"
[ "$GAP" -lt 3000 ] || die "the CLI got the lock only ${GAP} ms after Python released it"
WAITED=$(sed -n "s/.*acquired '$KEY' after \([0-9.ms]*\).*/\1/p" "$RUN/cli-wait.err")
[ -n "$WAITED" ] || die "no 'acquired ... after' line from distlock -v"
ok "CLI    waited $WAITED, its job started ${GAP} ms after Python's release"
say ""

# --------------------------------------------------------------- 4. crash
say "4. A crashed holder: Python takes it with ttl=2s and is killed with SIGKILL"
"$PY" -c '
import os, sys, time, distlock
servers, key, d = sys.argv[1:4]
c = distlock.Client(servers)
lock = c.lock(key, ttl=2)
assert lock.acquire(blocking=False)
open(d + "/crash.tmp", "w").write(lock.token)
os.rename(d + "/crash.tmp", d + "/crash.ready")
time.sleep(60)                              # "working" until it is killed
' "$SERVERS" "$KEY" "$RUN" 2>"$RUN/py-crash.err" &
HOLDER=$!; PIDS+=("$HOLDER")
wait_for 10 "[ -s '$RUN/crash.ready' ]"
kill -9 "$HOLDER"
st=0; wait "$HOLDER" 2>/dev/null || st=$?
[ "$st" = 137 ] || die "the Python holder was not killed by SIGKILL (status $st)"
T_CRASH=$(date +%s%N)
ok "Python holder killed (kill -9): it cannot release its lock"
say "   \$ distlock status $KEY"
st=0; "$DL" status "$KEY" >"$RUN/status.out" 2>&1 || st=$?
sed 's/^/            /' "$RUN/status.out"
[ "$st" = 0 ] || die "distlock status says the key is not held (exit $st)"
grep -q "held by $(cat "$RUN/crash.ready")" "$RUN/status.out" || die "status does not show the dead holder's token"
expect_php_refused
say "   \$ distlock run -v --wait 10s $KEY -- <job>"
st=0
"$DL" run -v --wait 10s "$KEY" -- sh -c 'redis-cli -p "$1" get "$DISTLOCK_KEY" > "$0/after-crash"' "$RUN" "$PORT" 2>"$RUN/cli-crash.err" || st=$?
sed 's/^/            /' "$RUN/cli-crash.err"
[ "$st" = 0 ] || die "distlock run after the crash exited $st"
SINCE=$(elapsed_ms "$T_CRASH")
[ -s "$RUN/after-crash" ] && [ "$(cat "$RUN/after-crash")" != "$(cat "$RUN/crash.ready")" ] ||
  die "the CLI's job did not hold the key itself"
[ "$SINCE" -lt 5000 ] || die "the expired lock was taken only ${SINCE} ms after the crash (ttl 2 s)"
ok "CLI    took it once the dead holder's 2 s lease expired"
out=$(php_try 2>&1) || die "PHP could not take the free key: $out"
case "$out" in "ACQUIRED "*$'\n'true) ;; *) die "PHP: unexpected '$out'" ;; esac
out=${out#ACQUIRED }
ok "PHP    distributedLock() -> ${out%%$'\n'*}, distributedUnlock() -> true"
say ""
DEMO_MS=$(elapsed_ms "$T_DEMO")
REDIS_PID=$(cat "$RUN/redis/redis-$PORT.pid")
bash "$REPO/tests/harness/redis.sh" stop "$RUN/redis" >/dev/null
for p in "$REDIS_PID" "${PIDS[@]}"; do
  ! kill -0 "$p" 2>/dev/null || die "process $p is still running"
done
say "All steps checked in $(secs "$DEMO_MS")s (setup: $(secs "$SETUP_MS")s)."
say "redis-server (pid $REDIS_PID) stopped; none of the demo's ${#PIDS[@]} holder processes is left running."
