#!/usr/bin/env bash
# The version is stated once, in core/include/distlock.h (DISTLOCK_VERSION_MAJOR,
# _MINOR, _PATCH). CMake (project(VERSION), the .pc and the CMake version file)
# and the Python metadata read it from there; what cannot read a C header
# carries a copy that this script compares: DISTLOCK_VERSION_STRING,
# packaging/package.xml (PECL release and api), php-ext/php_distlock.h and its
# load test, the man page, packaging/debian/changelog (its newest entry's
# upstream version: no epoch, no Debian revision), and CHANGELOG.md (a section for the version, or the
# Unreleased section saying it will be released as that version).
# scripts/set-version.sh X.Y.Z rewrites all of them. Exits non-zero on any
# disagreement. Usage: bash scripts/check-version.sh
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

hdr=core/include/distlock.h
part() { sed -n "s/^#define DISTLOCK_VERSION_$1 \([0-9][0-9]*\)\$/\1/p" "$hdr"; }
v="$(part MAJOR).$(part MINOR).$(part PATCH)"
[[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "FAIL cannot read the version from $hdr"; exit 1; }
echo "version (from $hdr): $v"

pass=0; fail=0
agree() { # what, value found
  if [ "$2" = "$v" ]; then pass=$((pass+1)); echo "ok   $1: $2"
  else fail=$((fail+1)); echo "FAIL $1: '${2}' (want $v)"; fi
}

agree "$hdr DISTLOCK_VERSION_STRING" "$(sed -n 's/^#define DISTLOCK_VERSION_STRING "\(.*\)"$/\1/p' "$hdr")"

# CMake: configure only (a few seconds), read what it made of the header.
if cmake -S . -B "$work/cmake" -DDISTLOCK_BUILD_TESTS=OFF -DDISTLOCK_BUILD_CLI=OFF >"$work/cmake.log" 2>&1; then
  agree "CMake project(VERSION)" "$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$work/cmake/CMakeCache.txt")"
  agree "distlock.pc Version" "$(sed -n 's/^Version: //p' "$work/cmake/core/distlock.pc")"
  agree "distlock-config-version.cmake" \
    "$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$work/cmake/core/distlock-config-version.cmake")"
else
  fail=$((fail+1)); echo "FAIL cmake configure"; sed 's/^/     /' "$work/cmake.log"
fi

agree "Python metadata (setup.py --version)" "$(cd python && python3 setup.py --version 2>/dev/null | tail -n 1)"

xp() { xmllint --xpath "string(/*[local-name()='package']/*[local-name()='version']/*[local-name()='$1'])" packaging/package.xml 2>/dev/null \
       || sed -n "s:^ *<$1>\(.*\)</$1>\$:\1:p" packaging/package.xml | head -n 1; }
agree "packaging/package.xml <release>" "$(xp release)"
agree "packaging/package.xml <api>" "$(xp api)"
agree "php-ext/php_distlock.h PHP_DISTLOCK_VERSION" \
  "$(sed -n 's/^#define PHP_DISTLOCK_VERSION "\(.*\)"$/\1/p' php-ext/php_distlock.h)"
agree "php-ext/tests/001_load.phpt expected phpversion()" \
  "$(sed -n 's/^string([0-9]*) "\([0-9]*\.[0-9]*\.[0-9]*\)"$/\1/p' php-ext/tests/001_load.phpt | tail -n 1)"
agree "packaging/distlock.1 .TH" "$(sed -n 's/^\.TH .*"distlock \([^"]*\)".*/\1/p' packaging/distlock.1)"

# debian/changelog: the newest entry, e.g. "distlock (1:0.1.0-2) unstable; ..." -> 0.1.0
agree "packaging/debian/changelog newest entry (upstream part)" \
  "$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' packaging/debian/changelog | sed -e 's/^[0-9]*://' -e 's/-[^-]*$//')"

# CHANGELOG.md: the newest section is this version, or Unreleased "To be released as" it.
cl=$(awk '/^## \[/ { if (seen) exit; seen=1; h=$0; next }
          seen && /To be released as/ { match($0, /[0-9]+\.[0-9]+\.[0-9]+/); print substr($0, RSTART, RLENGTH); found=1; exit }
          END { if (!found && h != "" && h !~ /Unreleased/) { sub(/^## \[/, "", h); sub(/\].*/, "", h); print h } }' CHANGELOG.md)
agree "CHANGELOG.md newest section" "$cl"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
