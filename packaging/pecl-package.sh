#!/usr/bin/env bash
# Make the PECL tarball distlock-X.Y.Z.tgz from packaging/package.xml.
#
#   bash packaging/pecl-package.sh OUTDIR      (last line on stdout: the tarball's path)
#
# `pecl package` takes the files that package.xml lists from the directory it
# stands in; they live in three places of the repository, so each listed file
# is copied into a staging directory first: core/... from the top-level core/
# (the bundled C library), LICENSE from the top-level LICENSE (php-ext/LICENSE
# is a link to it), everything else from php-ext/. A listed file that does not
# exist fails here; a file the build needs but package.xml omits fails the
# build from the tarball (packaging/test-pecl.sh) and php-ext/tests/run.sh's
# listing check. Needs php-pear (scripts/deps.sh).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:?usage: packaging/pecl-package.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
command -v pecl >/dev/null || { echo "pecl-package: pecl not found (Debian: php-pear; run scripts/deps.sh)" >&2; exit 1; }

stage=$(mktemp -d "${TMPDIR:-/tmp}/distlock-pecl-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT

php -r '
  $x = simplexml_load_file($argv[1]);
  $x->registerXPathNamespace("p", "http://pear.php.net/dtd/package-2.0");
  foreach ($x->xpath("//p:contents//p:file/@name") as $n) echo $n, "\n";
' "$top/packaging/package.xml" > "$stage/.files"
[ -s "$stage/.files" ] || { echo "pecl-package: no <file> in packaging/package.xml" >&2; exit 1; }

while IFS= read -r f; do
  case "$f" in
    core/*)  src=$top/$f ;;
    LICENSE) src=$top/LICENSE ;;
    *)       src=$top/php-ext/$f ;;
  esac
  [ -f "$src" ] || { echo "pecl-package: package.xml lists $f, but $src does not exist" >&2; exit 1; }
  mkdir -p "$stage/$(dirname "$f")"
  cp -L "$src" "$stage/$f"   # -L: the real text, never a link
done < "$stage/.files"
rm -f "$stage/.files"
cp "$top/packaging/package.xml" "$stage/package.xml"

# pecl writes its tarball into the current directory; its own messages go to stderr.
(cd "$stage" && pecl package package.xml) > "$stage/.log" 2>&1 || {
  echo "pecl-package: pecl package failed:" >&2; cat "$stage/.log" >&2; exit 1; }
# Warnings (e.g. a release date that is not today) are shown, not fatal.
grep -i "warning" "$stage/.log" >&2 || true
tgz=$(ls "$stage"/distlock-*.tgz)
mv "$tgz" "$out/"
echo "$out/$(basename "$tgz")"
