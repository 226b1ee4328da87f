#!/usr/bin/env bash
# Set the version: the header's three macros (the one place CMake and Python
# read), and the copies scripts/check-version.sh compares with them. The
# CHANGELOG.md section is yours to write. Usage: bash scripts/set-version.sh X.Y.Z
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
echo "version set to $v; now write its CHANGELOG.md section, then: bash scripts/check-version.sh"
