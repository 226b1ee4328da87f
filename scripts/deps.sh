#!/usr/bin/env bash
# Install the Debian 12 packages distlock needs to build, test, demo and
# benchmark. Quick when everything is present: apt runs only for what's missing.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config git
  redis-server redis-tools libhiredis-dev libssl-dev openssl
  libcmocka-dev valgrind
  libuv1-dev      # examples/multi_libuv.c: the non-blocking API on a libuv loop (built with the tests)
  php-dev php-cli php-cgi php-xml php-redis php-symfony-lock
  php-illuminate-cache phpunit   # the Laravel lock driver and the PHP adapters' PHPUnit suites
  swig python3-dev python3-setuptools python3-pytest python3-redis python3-venv python3-pip
  mypy   # python3-mypy: mypy --strict and stubtest of the Python package (python/tests/run.sh)
  abigail-tools   # abidw/abidiff: the ABI check against packaging/abi/ (release suite)
  clang libclang-rt-14-dev   # libFuzzer (libclang_rt.fuzzer) for tests/fuzz (fuzz suite)
  php-pear        # pecl: the PECL tarball, built and installed (pecl suite)
  python3-build   # python3 -m build: the sdist and wheel, offline (pydist suite)
)
PKGS+=("$@")   # callers may add their own (bench: gnuplot-nox, nodejs, npm)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "distlock: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts a system redis-server on 6379 after install; the project never
# uses it (every script starts its own on a free port), so leave it be.
