#!/usr/bin/env bash
# ABI check of libdistlock.so against the committed baseline
# packaging/abi/libdistlock.so.0.abi (libabigail's abidw/abidiff, Debian's
# abigail-tools). Builds the shared library with debug info (RelWithDebInfo) in
# build-abi/ and compares the public ABI -- only types from core/include count.
#   - a removed or changed function, variable or public type FAILS, unless the
#     SONAME changed too (an announced break: then regenerate the baseline);
#   - added functions or variables PASS, and are printed, so the baseline is
#     updated on purpose, in the commit that adds them:
#         bash packaging/abi/check-abi.sh --update
# Usage: bash packaging/abi/check-abi.sh [--update] [BUILD_DIR]
#   DISTLOCK_ABI_SOURCE=DIR compares the tree in DIR (a scratch copy) instead.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
base=$top/packaging/abi/libdistlock.so.0.abi
update=0
[ "${1:-}" = "--update" ] && { update=1; shift; }
src=${DISTLOCK_ABI_SOURCE:-$top}
build=${1:-$top/build-abi}

cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLOCK_SANITIZE= \
  -DDISTLOCK_BUILD_TESTS=OFF -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF >"$build.log" 2>&1 &&
  cmake --build "$build" -j2 --target distlock >>"$build.log" 2>&1 \
  || { echo "FAIL build of libdistlock.so in $build"; tail -n 40 "$build.log"; exit 1; }
so=$(readlink -f "$build/core/libdistlock.so")
echo "library: $so"

# Stable output: no build paths, short locations, public types only.
abidw_opts=(--headers-dir "$src/core/include" --no-corpus-path --no-comp-dir-path
            --short-locs --drop-private-types)
if [ $update -eq 1 ]; then
  abidw "${abidw_opts[@]}" --out-file "$base" "$so" || { echo "FAIL abidw"; exit 1; }
  echo "baseline written: ${base#"$top"/} ($(grep -c '<elf-symbol ' "$base") symbols); commit it"
  exit 0
fi
[ -f "$base" ] || { echo "FAIL no baseline ${base#"$top"/}: bash $0 --update"; exit 1; }

report=$(abidiff --hd2 "$src/core/include" --drop-private-types "$base" "$so" 2>&1)
rc=$?
printf '%s\n' "$report" | sed 's/^/  | /'
if [ $((rc & 3)) -ne 0 ]; then echo "FAIL abidiff could not compare (exit $rc)"; exit 1; fi

# abidiff's exit bit 8 marks only removals as incompatible; a changed
# signature or type is bit 4 like an addition, so read the summaries:
# anything removed or changed (not filtered out as harmless) is a break.
num() { printf '%s\n' "$report" | sed -n "s/.*$1 summary: \([0-9]*\) Removed.*, \([0-9]*\) Changed.*/\1 \2/p" | head -n 1; }
broken=0
for what in "Functions changes" "Variables changes" "Function symbols changes" "Variable symbols changes"; do
  read -r removed changed <<<"$(num "$what")"
  [ "${removed:-0}" -gt 0 ] || [ "${changed:-0}" -gt 0 ] && broken=1
done
[ $((rc & 8)) -ne 0 ] && broken=1
added=$(printf '%s\n' "$report" | grep -Eo '[0-9]+ Added (functions|variables?|function symbols? not referenced by debug info|variable symbols? not referenced by debug info)' \
        | awk '{s += $1} END {print s + 0}')

old_soname=$(sed -n "1s/.*soname='\([^']*\)'.*/\1/p" "$base")
new_soname=$(objdump -p "$so" | awk '$1 == "SONAME" {print $2}')
if [ $broken -eq 1 ]; then
  if [ -n "$new_soname" ] && [ "$new_soname" != "$old_soname" ]; then
    echo "ok   incompatible change with a new SONAME ($old_soname -> $new_soname): regenerate the baseline (bash $0 --update)"
    exit 0
  fi
  echo "FAIL incompatible ABI change while the SONAME stays $new_soname (see above): restore the ABI, or bump DISTLOCK_VERSION_MAJOR (the SONAME) and regenerate the baseline"
  exit 1
fi
if [ "$added" -gt 0 ]; then
  echo "ok   ABI compatible with the baseline; $added added interface(s) (listed above): record them with bash packaging/abi/check-abi.sh --update"
else
  echo "ok   ABI identical to the baseline ($new_soname)"
fi
