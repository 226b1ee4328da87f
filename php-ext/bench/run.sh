#!/usr/bin/env bash
# Build the extension, start a throwaway redis-server and run pairs.php against it.
#   bash php-ext/bench/run.sh [PAIRS] [ROUNDS] [--json]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
so=$(bash "$repo/php-ext/build.sh" | tail -n 1)
work=$(mktemp -d "${TMPDIR:-/tmp}/distlock-phpbench.XXXXXX")
trap 'bash "$repo/tests/harness/redis.sh" stop "$work"; rm -rf "$work"' EXIT
bash "$repo/tests/harness/redis.sh" start "$work" 1 >/dev/null
uri=$(bash "$repo/tests/harness/redis.sh" uris "$work")
php -d extension="$so" "$here/pairs.php" "$uri" "$@"
