#!/usr/bin/env bash
# Run an example program against a throwaway redis-server (tests/harness/redis.sh):
#   run-example.sh PROGRAM
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'bash "$here/../tests/harness/redis.sh" stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
bash "$here/../tests/harness/redis.sh" start "$dir" 1 >/dev/null
"$1" "$(bash "$here/../tests/harness/redis.sh" uris "$dir")"
