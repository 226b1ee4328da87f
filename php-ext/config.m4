dnl config.m4 for the distlock extension.
dnl
dnl   phpize && ./configure [--with-distlock[=WHERE]] && make
dnl
dnl Where libdistlock (the C core) comes from, by WHERE:
dnl   (none), yes, autodetect   an installed libdistlock found by pkg-config
dnl              (module distlock, at least this extension's version: e.g.
dnl              Debian's libdistlock-dev or a CMake install on PKG_CONFIG_PATH),
dnl              else the core sources bundled in the PECL tarball (core/).
dnl   bundled    the bundled core sources, whatever is installed.
dnl   DIR        a CMake build directory of this repository (with
dnl              core/libdistlock.a) or an install prefix (include/distlock.h,
dnl              lib*/libdistlock.a); php-ext/build.sh passes its build dir.
dnl The bundled sources and libdistlock.a are compiled / linked into
dnl distlock.so with their symbols kept inside it, so at run time it needs
dnl only libhiredis and OpenSSL's libssl/libcrypto; with pkg-config it links
dnl the shared libdistlock.so.0.

PHP_ARG_WITH([distlock],
  [for distlock support],
  [AS_HELP_STRING([[--with-distlock[=WHERE]]],
    [Include distlock support. WHERE: empty (pkg-config distlock, else the bundled
     core sources), "bundled", or a CMake build dir / install prefix of libdistlock])])

if test "$PHP_DISTLOCK" != "no"; then
  distlock_srcdir=PHP_EXT_SRCDIR(distlock)
  distlock_mode=""
  DISTLOCK_INC=""
  DISTLOCK_LIB=""
  PKG_PROG_PKG_CONFIG
  dnl The core may be no older than this extension (both carry one version).
  distlock_want=`sed -n 's/^#define PHP_DISTLOCK_VERSION "\(.*\)"$/\1/p' "$distlock_srcdir/php_distlock.h"`

  dnl The core sources bundled in the PECL tarball (core/; a checkout of the
  dnl repository has them beside php-ext/ instead: php-ext/build.sh builds it).
  distlock_core=""
  if test -f "$distlock_srcdir/core/include/distlock.h" && test -f "$distlock_srcdir/core/src/client.c"; then
    distlock_core="$distlock_srcdir/core"
  fi

  case "$PHP_DISTLOCK" in
    yes|autodetect)
      AC_MSG_CHECKING([for libdistlock >= $distlock_want with pkg-config])
      if test -n "$PKG_CONFIG" && $PKG_CONFIG --atleast-version="$distlock_want" distlock 2>/dev/null; then
        AC_MSG_RESULT([yes, `$PKG_CONFIG --modversion distlock`])
        distlock_mode=pkg-config
      else
        AC_MSG_RESULT([no])
        if test -n "$PKG_CONFIG" && $PKG_CONFIG --exists distlock 2>/dev/null; then
          AC_MSG_WARN([libdistlock `$PKG_CONFIG --modversion distlock` is older than $distlock_want: using the bundled core])
        fi
        distlock_mode=bundled
      fi
      ;;
    bundled)
      distlock_mode=bundled
      ;;
    *)
      distlock_mode=dir
      ;;
  esac

  if test "$distlock_mode" = "bundled"; then
    AC_MSG_CHECKING([for the bundled libdistlock sources])
    if test -z "$distlock_core"; then
      AC_MSG_RESULT([not found])
      AC_MSG_ERROR([no libdistlock: neither pkg-config (module distlock) nor the bundled core/ sources found; install libdistlock-dev or pass --with-distlock=DIR (a CMake build dir or install prefix)])
    fi
    AC_MSG_RESULT([$distlock_core])
  fi

  if test "$distlock_mode" = "dir"; then
    AC_MSG_CHECKING([for libdistlock in $PHP_DISTLOCK])
    dir=$PHP_DISTLOCK
    if test -f "$dir/core/libdistlock.a"; then
      dnl A CMake build dir: the header is in the source tree it was configured from.
      src=`sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$dir/CMakeCache.txt" 2>/dev/null`
      if test -n "$src" && test -f "$src/core/include/distlock.h"; then
        DISTLOCK_INC="$src/core/include"
      elif test -f "$distlock_srcdir/../core/include/distlock.h"; then
        DISTLOCK_INC="$distlock_srcdir/../core/include"
      fi
      DISTLOCK_LIB="$dir/core/libdistlock.a"
    else
      for libdir in lib lib64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu; do
        if test -f "$dir/include/distlock.h" && test -f "$dir/$libdir/libdistlock.a"; then
          DISTLOCK_INC="$dir/include"
          DISTLOCK_LIB="$dir/$libdir/libdistlock.a"
          break
        fi
      done
    fi
    if test -z "$DISTLOCK_INC" || test -z "$DISTLOCK_LIB"; then
      AC_MSG_RESULT([not found])
      AC_MSG_ERROR([libdistlock not found in $PHP_DISTLOCK: pass a CMake build dir of distlock or its install prefix, or --with-distlock alone (pkg-config, else the bundled sources)])
    fi
    AC_MSG_RESULT([$DISTLOCK_LIB])
  fi

  PKG_CHECK_MODULES([HIREDIS], [hiredis])
  PHP_EVAL_INCLINE($HIREDIS_CFLAGS)

  distlock_ext_sources="distlock.c distlock_client_cache.c distlock_errors.c distlock_compat.c distlock_client.c distlock_lock.c distlock_args.c"
  distlock_cflags="-DZEND_ENABLE_STATIC_TSRMLS_CACHE=1 -Wall"

  case "$distlock_mode" in
    pkg-config)
      PKG_CHECK_MODULES([DISTLOCK], [distlock >= $distlock_want])
      PHP_EVAL_INCLINE($DISTLOCK_CFLAGS)
      DISTLOCK_SHARED_LIBADD="$DISTLOCK_LIBS $HIREDIS_LIBS"
      ;;
    bundled)
      dnl TLS (rediss:// nodes) in the core uses OpenSSL.
      PKG_CHECK_MODULES([OPENSSL], [openssl])
      PHP_EVAL_INCLINE($OPENSSL_CFLAGS)
      PHP_ADD_INCLUDE([$distlock_core/include])
      PHP_ADD_INCLUDE([$distlock_core/src])
      dnl Every core file, as the library's CMake list (whatever the core
      dnl grows); paths relative to this directory, as PHP_NEW_EXTENSION wants.
      distlock_core_sources=`cd "$distlock_srcdir" && ls core/src/*.c | tr '\n' ' '`
      distlock_ext_sources="$distlock_ext_sources $distlock_core_sources"
      PHP_ADD_BUILD_DIR(PHP_EXT_BUILDDIR(distlock)/core/src, 1)
      dnl As CMake builds the core: GNU C11, POSIX + GNU extensions.
      distlock_cflags="$distlock_cflags -std=gnu11 -D_GNU_SOURCE"
      dnl Only get_module leaves distlock.so: the core's distlock_* stay inside,
      dnl so another module or library carrying libdistlock cannot clash with it.
      echo '{ global: get_module; local: *; };' > distlock-ext.map
      DISTLOCK_SHARED_LIBADD="-Wl,--version-script=`pwd`/distlock-ext.map $HIREDIS_LIBS $OPENSSL_LIBS -lpthread"
      ;;
    dir)
      PHP_ADD_INCLUDE($DISTLOCK_INC)
      dnl The static archive goes in whole before hiredis, which it needs.
      dnl --exclude-libs: the core's symbols stay inside distlock.so, so another
      dnl module or library carrying its own libdistlock cannot clash with ours.
      PKG_CHECK_MODULES([OPENSSL], [openssl])
      DISTLOCK_SHARED_LIBADD="-Wl,--exclude-libs,libdistlock.a $DISTLOCK_LIB $HIREDIS_LIBS $OPENSSL_LIBS -lpthread"
      ;;
  esac
  dnl PHP unloads its extensions at shutdown (dlclose). The core's detached
  dnl threads (a name being resolved, a Sentinel lookup) may still run then,
  dnl in this module's code (bundled, dir) or libdistlock.so's (which is
  dnl linked -z nodelete itself): the module stays mapped until the exit.
  DISTLOCK_SHARED_LIBADD="-Wl,-z,nodelete $DISTLOCK_SHARED_LIBADD"
  AC_MSG_NOTICE([libdistlock: $distlock_mode])
  PHP_SUBST(DISTLOCK_SHARED_LIBADD)

  AC_DEFINE(HAVE_DISTLOCK, 1, [ Have distlock support ])
  dnl One file per job (php_distlock_int.h lists them), as php-src ext/random.
  PHP_NEW_EXTENSION(distlock, $distlock_ext_sources, $ext_shared,, $distlock_cflags)
  PHP_ADD_EXTENSION_DEP(distlock, spl)
fi
