#!/usr/bin/env bash
# Every snippet of the documentation runs.
#
#   bash tests/check-doc-snippets.sh [FILE.md...]
#
# Reads README.md, docs/**/*.md and the front ends' READMEs (php-ext/, python/,
# cli/README.md), or only the FILEs given, and runs every fenced block tagged
#   c       a complete program (its includes and main): compiled against the
#           built libdistlock and run
#   sh      run by bash -e in an empty directory, the built `distlock` command
#           first on PATH
#   php     run by php with the built extension (a block without `<?php` gets one);
#           `require 'Distlock/autoload.php';` loads this checkout's php-adapters/
#           (where the php-distlock package installs it: /usr/share/php/Distlock/,
#           on the include path), and with it Debian's symfony/lock and
#           illuminate/cache
#   python  run by the python of a venv with the built package
# Any other tag (text, console, ini, conf, systemd, crontab, ...) is not run:
# that is how a page shows what cannot run here (install commands, output,
# configuration). A fence with no tag, or with a tag that is a runnable
# language under another name (bash, shell, py, ...), is an error: each block
# says which it is.
#
# Addresses: snippets write redis://127.0.0.1:6379 (and :6380, :6381 for three
# nodes). The runner starts three throwaway redis-servers
# (tests/harness/redis.sh) and rewrites those three addresses to its servers'
# ports; DISTLOCK_SERVERS (the default of python and the CLI) and PHP's
# distlock.servers name the first. The servers are emptied (FLUSHALL) before
# each block, so no block sees another's locks. Only when a block uses them,
# it also brings up (with the same harness) and rewrites to:
#   rediss://127.0.0.1:6390        a TLS server (certs.sh's throwaway CA);
#     /etc/ssl/redis-ca.pem, /etc/ssl/redis-client.pem, /etc/ssl/redis-client.key
#     become that CA and a client certificate and key it signed
#   redis-sentinel://127.0.0.1:26379/mymaster
#                                  a Sentinel group (one master, one sentinel)
#   redis-cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002
#                                  a Redis Cluster of three masters
#
# One block is not run here: README.md's quick start (scripts/demo.sh and
# scripts/test.sh, which runs this check): the demo suite and .ci/run run it.
#
# The option lists (docs/servers.md, docs/reference/distlock_option.md,
# php-ext/README.md, packaging/distlock.1) are checked against the library's
# option table first: scripts/gen-option-docs.py --check.
#
# A failing block is reported as FILE:LINE (the line of its opening fence)
# with its output; the exit status is 1 if any block failed.
#
# Builds (each once, reused when up to date):
#   DISTLOCK_CORE_BUILD  a CMake build dir with the library and the distlock
#                        command built (scripts/test.sh passes its build/);
#                        default build-docs/core, built here
#   the PHP extension    php-ext/build.sh against that core
#   the Python package   python/build.sh into build-docs/venv
# (build-docs/ under $DISTLOCK_TEST_BUILD_ROOT, default the checkout).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_root=${DISTLOCK_TEST_BUILD_ROOT:-$root}/build-docs
mkdir -p "$build_root"
work=$(mktemp -d "${TMPDIR:-/tmp}/distlock-docs.XXXXXX")
cleanup() {
  local d
  for d in redis tls sentinel cluster; do
    [ -d "$work/$d" ] && bash "$root/tests/harness/redis.sh" stop "$work/$d" >/dev/null 2>&1
  done
  rm -rf "$work"
}
trap cleanup EXIT

if [ $# -gt 0 ]; then
  files=("$@")
else
  files=(README.md php-ext/README.md python/README.md cli/README.md)
  while IFS= read -r f; do files+=("$f"); done < <(find docs -name '*.md' 2>/dev/null | sort)
fi

# 1. The blocks: $work/blocks/N.{c,sh,php,py} and a manifest "N<TAB>lang<TAB>file:line".
mkdir -p "$work/blocks"
tag_errors=0
python3 - "$work/blocks" "$root/README.md" "${files[@]}" <<'PY' || tag_errors=$?
import os, re, sys
out, top_readme, files = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3:]
run = {"c": "c", "sh": "sh", "php": "php", "python": "py"}
# A runnable language under another name: say which tag to use instead.
aliases = {"bash": "sh", "shell": "sh", "zsh": "sh", "py": "python", "python3": "python",
           "php8": "php", "C": "c", "h": "c"}
bad, n = [], 0
manifest = open(out + "/manifest", "w")
for path in files:
    lines = open(path, encoding="utf-8").read().split("\n")
    # The top README's quick start (its first sh block under a "Quick start"
    # heading, the block ../shared/tools/fresh-debian runs) is scripts/test.sh
    # itself: listed, not run here.
    quick_start = os.path.realpath(path) == top_readme
    heading = ""
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+|~~~+)(.*)$", lines[i])
        if not m:
            if lines[i].startswith("#"):
                heading = lines[i]
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        start = i + 1                       # 1-based line of the opening fence
        body, i = [], i + 1
        while i < len(lines) and not re.match(r"^\s*" + re.escape(fence[0]) + "{%d,}\s*$" % len(fence), lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        if i == len(lines):
            bad.append("%s:%d: fence never closed" % (path, start))
        i += 1
        tag = info.split()[0] if info else ""
        where = "%s:%d" % (path, start)
        if not tag:
            bad.append("%s: a fence without a tag: tag it c, sh, php or python to run it, "
                       "or text, console, ini, ... if it does not run" % where)
        elif tag in aliases:
            bad.append("%s: tag '%s': write '%s' (it then runs) or text/console (it does not)"
                       % (where, tag, aliases[tag]))
        elif tag == "sh" and quick_start and re.search(r"[Qq]uick start", heading):
            quick_start = False
            manifest.write("0\tquickstart\t%s\n" % where)
        elif tag in run:
            n += 1
            with open("%s/%d.%s" % (out, n, run[tag]), "w", encoding="utf-8") as f:
                f.write("\n".join(body) + "\n")
            manifest.write("%d\t%s\t%s\n" % (n, tag, where))
manifest.close()
for b in bad:
    print("FAIL " + b)
sys.exit(1 if bad else 0)
PY
[ -s "$work/blocks/manifest" ] || { echo "no runnable block found in: ${files[*]}" >&2; exit 1; }
count() { grep -c "	$1	" "$work/blocks/manifest" || true; }
echo "== docs: $(grep -vc '	quickstart	' "$work/blocks/manifest") blocks to run ($(count c) c, $(count sh) sh, $(count php) php, $(count python) python) from ${#files[@]} files"

# 2. What they run against.
core=${DISTLOCK_CORE_BUILD:-$build_root/core}
if [ -z "${DISTLOCK_CORE_BUILD:-}" ]; then
  echo "== docs: building libdistlock and the distlock command in $core"
  { cmake -S "$root" -B "$core" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLOCK_BUILD_TESTS=OFF \
      -DDISTLOCK_BUILD_PHP=OFF && cmake --build "$core" -j2 --target distlock distlock_static distlock_cli; } \
    > "$build_root/core-build.log" 2>&1 || { tail -n 40 "$build_root/core-build.log"; exit 1; }
fi
core=$(cd "$core" && pwd)
if [ ! -f "$core/core/libdistlock.so" ] || [ ! -x "$core/cli/distlock" ]; then
  echo "$core: no core/libdistlock.so or cli/distlock built" >&2; exit 1
fi
# The option lists of the pages (marked blocks) are what the library's table gives.
python3 "$root/scripts/gen-option-docs.py" --check --lib "$core/core/libdistlock.so" || opt_stale=1
if [ "$(count php)" -gt 0 ]; then
  echo "== docs: building the PHP extension (php-ext/build.sh)"
  php_so=$(bash "$root/php-ext/build.sh" --core-build "$core" | tail -n 1)
  # The adapters as the Debian package lays them out (include_path/Distlock/),
  # from this checkout, ahead of an installed copy.
  mkdir -p "$work/php-include"
  ln -s "$root/php-adapters" "$work/php-include/Distlock"
  php_include=$work/php-include:$(php -n -r 'echo get_include_path();')
fi
if [ "$(count python)" -gt 0 ]; then
  echo "== docs: installing the Python package into $build_root/venv (python/build.sh)"
  bash "$root/python/build.sh" "$build_root/venv" >/dev/null
fi

redis=$root/tests/harness/redis.sh
read -r -a ports < <(bash "$redis" start "$work/redis" 3)
[ ${#ports[@]} -eq 3 ] || { echo "could not start 3 redis-servers" >&2; exit 1; }
export DISTLOCK_SERVERS=redis://127.0.0.1:${ports[0]}
export PATH=$core/cli:$PATH
echo "== docs: redis-servers on ${ports[*]} stand for 127.0.0.1:6379, :6380, :6381"
# Each documented address becomes a placeholder first, then the real one, so a
# real port never matches another documented address.
rewrite=$work/rewrite.sed final=$work/rewrite-final.sed nmap=0
: > "$rewrite"; : > "$final"
map() {  # map DOCUMENTED REAL: sed-escaped DOCUMENTED (a path or host:port) to REAL
  nmap=$((nmap + 1))
  printf 's|%s\\b|@DOCSADDR%d@|g\n' "$1" "$nmap" >> "$rewrite"
  printf 's|@DOCSADDR%d@|%s|g\n' "$nmap" "$2" >> "$final"
}
map '127\.0\.0\.1:6379' "127.0.0.1:${ports[0]}"
map '127\.0\.0\.1:6380' "127.0.0.1:${ports[1]}"
map '127\.0\.0\.1:6381' "127.0.0.1:${ports[2]}"
uses() { grep -q "$1" "$work"/blocks/[0-9]*; }
if uses 'rediss://127\.0\.0\.1:6390'; then
  bash "$root/tests/harness/certs.sh" "$work/certs"
  DISTLOCK_TLS_CERTS=$work/certs bash "$redis" start "$work/tls" 1 >/dev/null
  tls_port=$(cat "$work"/tls/redis-*.tlsport)
  map '127\.0\.0\.1:6390' "127.0.0.1:$tls_port"
  map '/etc/ssl/redis-ca\.pem' "$work/certs/ca.crt"
  map '/etc/ssl/redis-client\.pem' "$work/certs/client.crt"
  map '/etc/ssl/redis-client\.key' "$work/certs/client.key"
  echo "== docs: a TLS redis-server on $tls_port stands for rediss://127.0.0.1:6390"
fi
if uses 'redis-sentinel://127\.0\.0\.1:26379'; then
  uri=$(bash "$redis" sentinels "$work/sentinel" --replicas 0 --sentinels 1 --quorum 1)
  sentinel=${uri#redis-sentinel://}; sentinel=${sentinel%%/*}
  map '127\.0\.0\.1:26379' "$sentinel"
  echo "== docs: a Sentinel group, $uri, stands for redis-sentinel://127.0.0.1:26379/mymaster"
fi
if uses 'redis-cluster://127\.0\.0\.1:7000'; then
  uri=$(bash "$redis" cluster "$work/cluster" 3 0)
  IFS=, read -r -a masters <<< "${uri#redis-cluster://}"
  map '127\.0\.0\.1:7000' "${masters[0]}"
  map '127\.0\.0\.1:7001' "${masters[1]}"
  map '127\.0\.0\.1:7002' "${masters[2]}"
  echo "== docs: a Redis Cluster, $uri, stands for 127.0.0.1:7000, :7001, :7002"
fi
cat "$final" >> "$rewrite"

# 3. Each block, alone.
failed=0 ran=0
while IFS=$'\t' read -r n lang where; do
  case $lang in c) src=$work/blocks/$n.c ;; python) src=$work/blocks/$n.py ;; *) src=$work/blocks/$n.$lang ;; esac
  if [ "$lang" = quickstart ]; then
    echo "skip $where (sh): the quick start, run by the demo suite and .ci/run"
    continue
  fi
  sed -i -f "$rewrite" "$src"
  for p in "${ports[@]}"; do redis-cli -p "$p" flushall >/dev/null; done
  dir=$work/run-$n
  mkdir -p "$dir"
  rc=0
  case $lang in
    c)
      if cc -std=c11 -Wall -Werror -I"$root/core/include" "$src" -L"$core/core" -ldistlock \
           -Wl,-rpath,"$core/core" -o "$dir/prog" > "$dir/out" 2>&1; then
        (cd "$dir" && timeout 60 ./prog) >> "$dir/out" 2>&1 || rc=$?
      else rc=$?; fi ;;
    sh)
      (cd "$dir" && timeout 60 bash -e "$src") > "$dir/out" 2>&1 || rc=$? ;;
    php)
      grep -q '^<?php' "$src" || sed -i '1i <?php' "$src"
      (cd "$dir" && timeout 60 php -n -d extension="$php_so" -d distlock.servers="$DISTLOCK_SERVERS" \
         -d include_path="$php_include" \
         -d display_errors=stderr -d error_reporting=-1 "$src") > "$dir/out" 2>&1 || rc=$?
      # a warning or notice is a snippet that uses what it does not define
      [ $rc -ne 0 ] || ! grep -qE '^(PHP )?(Warning|Notice|Deprecated):' "$dir/out" || rc=255 ;;
    python)
      (cd "$dir" && timeout 60 "$build_root/venv/bin/python" "$src") > "$dir/out" 2>&1 || rc=$? ;;
  esac
  ran=$((ran + 1))
  if [ $rc -ne 0 ]; then
    failed=$((failed + 1))
    echo "FAIL $where ($lang): exit $rc"
    sed 's/^/    | /' "$dir/out" | tail -n 30
  else
    echo "ok   $where ($lang)"
  fi
done < "$work/blocks/manifest"

[ $tag_errors -ne 0 ] && echo "untagged or mis-tagged fences: see the FAIL lines at the top"
[ "${opt_stale:-0}" -ne 0 ] && echo "option lists differ from the library's table: see the top (scripts/gen-option-docs.py)"
echo "docs: $ran blocks ran, $failed failed"
[ $failed -eq 0 ] && [ $tag_errors -eq 0 ] && [ "${opt_stale:-0}" -eq 0 ]
