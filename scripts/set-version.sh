#!/usr/bin/env bash
# Set the version: the header's three macros (the one place CMake and Python
# read), and the copies scripts/check-version.sh compares with them (the
# Debian changelog gets an UNRELEASED entry). The CHANGELOG.md section is
# yours to write. Usage: bash scripts/set-version.sh X.Y.Z
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
v=${1:-}
[[ $v =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || { echo "usage: $0 X.Y.Z" >&2; exit 2; }
sed -i -e "s/^#define DISTLOCK_VERSION_MAJOR [0-9]*\$/#define DISTLOCK_VERSION_MAJOR ${BASH_REMATCH[1]}/" \
       -e "s/^#define DISTLOCK_VERSION_MINOR [0-9]*\$/#define DISTLOCK_VERSION_MINOR ${BASH_REMATCH[2]}/" \
       -e "s/^#define DISTLOCK_VERSION_PATCH [0-9]*\$/#define DISTLOCK_VERSION_PATCH ${BASH_REMATCH[3]}/" \
       -e "s/^#define DISTLOCK_VERSION_STRING \".*\"\$/#define DISTLOCK_VERSION_STRING \"$v\"/" core/include/distlock.h
sed -i -e "s:<release>[0-9.]*</release>:<release>$v</release>:" -e "s:<api>[0-9.]*</api>:<api>$v</api>:" packaging/package.xml
sed -i "s/^#define PHP_DISTLOCK_VERSION \".*\"\$/#define PHP_DISTLOCK_VERSION \"$v\"/" php-ext/php_distlock.h
sed -i "s/^string([0-9]*) \"[0-9]*\.[0-9]*\.[0-9]*\"\$/string(${#v}) \"$v\"/" php-ext/tests/001_load.phpt
sed -i "s/\"distlock [0-9.]*\"/\"distlock $v\"/" packaging/distlock.1
# packaging/debian/changelog: an UNRELEASED newest entry takes the version;
# else a new UNRELEASED entry X.Y.Z-1 goes on top (by the newest entry's
# maintainer; set its distribution when the release is made).
dch=packaging/debian/changelog
first=$(head -n 1 "$dch")
if [[ $first =~ ^([^ ]+)\ \(([^\)]+)\)\ ([^;]+)\; ]] && [ "${BASH_REMATCH[3]}" = UNRELEASED ]; then
  sed -i -e "1s/([^)]*)/($v-1)/" -e "1,/^ -- /s/New upstream version [0-9.]* /New upstream version $v /" "$dch"
elif ! [[ $first =~ ^[^\ ]+\ \((.*:)?$v-[^-]*\) ]]; then
  who=$(sed -n 's/^ -- \(.*>\)  .*/\1/p' "$dch" | head -n 1)
  { printf '%s (%s-1) UNRELEASED; urgency=medium\n\n' "${first%% *}" "$v"
    printf '  * New upstream version %s (see CHANGELOG.md).\n\n' "$v"
    printf ' -- %s  %s\n\n' "$who" "$(LC_ALL=C date -R)"
    cat "$dch"; } > "$dch.new" && mv "$dch.new" "$dch"
fi
echo "version set to $v; now write its CHANGELOG.md section, then: bash scripts/check-version.sh"
