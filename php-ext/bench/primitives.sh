#!/usr/bin/env bash
# Build the extension, start throwaway redis-servers (1, then 3 for Redlock) and
# run primitives.php against each: pairs/s of a lock, a read lock, a permit and
# a set of 4 keys, and the release -> waiter hand-over of each.
#   bash php-ext/bench/primitives.sh [PAIRS] [ROUNDS] [HANDOVERS]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
so=$(bash "$repo/php-ext/build.sh" | tail -n 1)
work=$(mktemp -d "${TMPDIR:-/tmp}/distlock-phpbench.XXXXXX")
trap 'bash "$repo/tests/harness/redis.sh" stop "$work/one"; bash "$repo/tests/harness/redis.sh" stop "$work/three"; rm -rf "$work"' EXIT
bash "$repo/tests/harness/redis.sh" start "$work/one" 1 >/dev/null
bash "$repo/tests/harness/redis.sh" start "$work/three" 3 >/dev/null
for set in one three; do
  php -d extension="$so" "$here/primitives.php" "$(bash "$repo/tests/harness/redis.sh" uris "$work/$set")" "$@"
done
