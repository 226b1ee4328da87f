# Sourced by php-ext/tests/run.sh and php-adapters/tests/run.sh (bash).
#
# without_system_distlock WORKDIR LABEL: a distlock enabled system-wide (the
# php-distlock package's conf.d ini) would load beside the module under test
# ("Module "distlock" is already loaded"); then export PHP_INI_SCAN_DIR as a
# copy of the conf.d directory (symlinks in WORKDIR/conf.d) without it.
without_system_distlock() {
  local work=$1 label=$2 scan f g
  scan=$(php -n -r 'echo PHP_CONFIG_FILE_SCAN_DIR;')
  [ -n "$scan" ] && [ -d "$scan" ] || return 0
  for f in "$scan"/*.ini; do
    if loads_distlock "$f"; then
      mkdir -p "$work/conf.d"
      for g in "$scan"/*.ini; do loads_distlock "$g" || ln -s "$g" "$work/conf.d/"; done
      export PHP_INI_SCAN_DIR=$work/conf.d
      echo "$label: $f enables a system-wide distlock; the tests scan $PHP_INI_SCAN_DIR without it" >&2
      return 0
    fi
  done
}

loads_distlock() {
  grep -qsE '^[[:space:]]*extension[[:space:]]*=[[:space:]]*"?([^"]*/)?distlock(\.so)?"?[[:space:]]*$' "$1"
}
