#!/usr/bin/env bash
# Regenerate distlock_arginfo.h from distlock.stub.php with PHP's gen_stub.php.
# gen_stub.php wants to download PHP-Parser; Debian packages it (php-parser),
# so point it at that copy instead. Only needed after editing the stub; the
# test script checks that the committed arginfo matches the stub's hash.
set -euo pipefail
ext_src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$ext_src/.." && pwd)
bash "$repo/scripts/deps.sh" php-parser
gen=$(php-config --extension-dir)/build/gen_stub.php
[ -f "$gen" ] || { echo "gen_stub.sh: $gen not found (php-dev)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$gen" "$tmp/gen_stub.php"
ver=$(sed -n 's/.*\$version = "\([0-9.]*\)";.*/\1/p' "$gen" | head -n 1)
mkdir -p "$tmp/PHP-Parser-$ver/lib"
ln -s /usr/share/php/PhpParser "$tmp/PHP-Parser-$ver/lib/PhpParser"
php "$tmp/gen_stub.php" -f "$ext_src/distlock.stub.php"
