#!/usr/bin/env bash
# Build distlock's Debian packages (packaging/debian) into OUT_DIR, offline:
#   bash packaging/build-debs.sh [--install-build-deps] OUT_DIR
# The build runs in a temporary copy of the tree (the files git tracks, plus
# untracked ones it does not ignore) with packaging/debian copied to ./debian,
# so the checkout stays clean. --install-build-deps first installs the
# Build-Depends of debian/control with apt-get build-dep (needs root or sudo).
# Prints the paths of the .debs, one a line, last.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
install_deps=0
[ "${1:-}" = --install-build-deps ] && { install_deps=1; shift; }
out=${1:?usage: packaging/build-debs.sh [--install-build-deps] OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/distlock-debs.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/distlock
mkdir "$src"
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$top" && git ls-files -z --cached --others --exclude-standard) |
    (cd "$top" && xargs -0 cp --parents -P -t "$src" 2>/dev/null || true)
  # a file deleted but not yet committed is listed and cannot be copied: fine
else
  tar -C "$top" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$src" -xf -
fi
rm -rf "$src/debian"
cp -a "$top/packaging/debian" "$src/debian"

if [ "$install_deps" = 1 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get build-dep -y -qq --no-install-recommends "$src" >/dev/null
fi

log=$out/build-debs.log
echo "build-debs: dpkg-buildpackage -us -uc -b in $src (log: $log)" >&2
if ! (cd "$src" && dpkg-buildpackage -us -uc -b -j2) >"$log" 2>&1; then
  echo "build-debs: dpkg-buildpackage failed; last lines of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
# dpkg-gensymbols reports symbol differences without failing below its check
# level; none are accepted (debian/rules sets the level to 4, this is a guard).
if grep -q '^dpkg-gensymbols: warning' "$log"; then
  echo "build-debs: dpkg-gensymbols warned:" >&2
  grep -A30 '^dpkg-gensymbols: warning' "$log" >&2
  exit 1
fi
rm -f "$out"/*.deb
mv "$work"/*.deb "$out"/
cp "$work"/*.changes "$work"/*.buildinfo "$out"/ 2>/dev/null || true
ls "$out"/*.deb
