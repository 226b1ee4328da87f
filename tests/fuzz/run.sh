#!/usr/bin/env bash
# Build and run the libFuzzer targets of tests/fuzz under ASan+UBSan (clang
# and libFuzzer from Debian: clang, libclang-rt-14-dev):
#   fuzz_servers  the server-list grammar (uri.c) and distlock_client_new()
#   fuzz_replies  RESP through hiredis' reader into the reply classification
#                 (protocol.c) and the quorum tally and verdict (quorum.c)
#   fuzz_ttl      distlock_ttl_from_seconds(), the C part of the PHP and
#                 Python ttl conversion
# Each target runs DISTLOCK_FUZZ_SECONDS (default 18: under 60 s for the three) from its committed seed
# corpus (tests/fuzz/corpus/TARGET); what it learns goes to build-fuzz/, not
# into the tree. A crash, leak, sanitizer report or broken invariant fails the
# run and leaves the input in build-fuzz/crash-* (replay: build-fuzz/TARGET FILE).
# Usage: bash tests/fuzz/run.sh [TARGET...]
#   DISTLOCK_FUZZ_SECONDS=600 bash tests/fuzz/run.sh   a longer run
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$top/tests/fuzz
out=${DISTLOCK_FUZZ_BUILD:-$top/build-fuzz}
secs=${DISTLOCK_FUZZ_SECONDS:-18}
targets=(fuzz_servers fuzz_replies fuzz_ttl)
[ $# -gt 0 ] && targets=("$@")
cc=${DISTLOCK_FUZZ_CC:-clang}
mkdir -p "$out/obj"

san=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
cflags=(-g -O1 -std=gnu11 -D_GNU_SOURCE -I"$top/core/include" -I"$top/core/src"
        $(pkg-config --cflags hiredis) -Wno-unused-parameter)

# The core's sources compiled in (their distlock__ functions are hidden in
# the libraries), instrumented for coverage; rebuilt when a source is newer.
build_core() {
  local s o jobs=0 rc=0
  : >"$out/objs.list"
  for s in "$top"/core/src/*.c; do
    o=$out/obj/$(basename "${s%.c}").o
    echo "$o" >>"$out/objs.list"
    if [ ! -f "$o" ] || [ "$s" -nt "$o" ] ||
       [ -n "$(find "$top/core/src" "$top/core/include" -name '*.h' -newer "$o")" ]; then
      "$cc" -fsanitize=fuzzer-no-link "${san[@]}" "${cflags[@]}" -c "$s" -o "$o" &
      jobs=$((jobs + 1))
      if [ $jobs -ge 2 ]; then wait -n || rc=1; jobs=$((jobs - 1)); fi
    fi
  done
  while [ $jobs -gt 0 ]; do wait -n || rc=1; jobs=$((jobs - 1)); done
  return $rc
}

echo "== build ($cc, libFuzzer, ASan+UBSan) in ${out#"$top"/}"
build_core || { echo "FAIL building the core for fuzzing"; exit 1; }
mapfile -t objs <"$out/objs.list"
for t in "${targets[@]}"; do
  "$cc" -fsanitize=fuzzer "${san[@]}" "${cflags[@]}" "$here/$t.c" "${objs[@]}" \
    $(pkg-config --libs hiredis) $(pkg-config --libs openssl) -lpthread -o "$out/$t" || { echo "FAIL building $t"; exit 1; }
done

fail=0
for t in "${targets[@]}"; do
  work=$out/corpus-$t
  mkdir -p "$work"
  dict=(); [ -f "$here/$t.dict" ] && dict=(-dict="$here/$t.dict")
  echo "== $t: $secs s from tests/fuzz/corpus/$t ($(ls "$here/corpus/$t" | wc -l) seeds)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$out/$t" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=1024 \
    -print_final_stats=1 -artifact_prefix="$out/" "${dict[@]}" "$work" "$here/corpus/$t" \
    >"$out/$t.log" 2>&1
  rc=$?
  # libFuzzer's last status line: "#N DONE cov: C ft: F corp: ... exec/s: E ..."
  grep -E '^#[0-9]+[[:space:]]+(DONE|INITED)' "$out/$t.log" | tail -n 1 | sed 's/^/   /'
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$out/$t.log" | sed 's/^/   /'
  if [ $rc -eq 0 ]; then
    echo "ok   $t"
  else
    fail=$((fail+1))
    echo "FAIL $t (exit $rc): log $out/$t.log"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written|==[0-9]+==' "$out/$t.log" | head -n 20 | sed 's/^/     /'
  fi
done
[ $fail -eq 0 ]
