dnl config.m4 for the distlock extension.
dnl
dnl   phpize && ./configure --with-distlock=DIR && make
dnl
dnl DIR is a CMake build directory of this repository (with core/libdistlock.a)
dnl or an install prefix (include/distlock.h, lib*/libdistlock.a). The core is
dnl linked statically (it is built with -fPIC) so distlock.so needs nothing but
dnl libhiredis at run time.

PHP_ARG_WITH([distlock],
  [for distlock support],
  [AS_HELP_STRING([[--with-distlock[=DIR]]],
    [Include distlock support. DIR: a CMake build dir of libdistlock or its install prefix])])

if test "$PHP_DISTLOCK" != "no"; then
  AC_MSG_CHECKING([for libdistlock])
  DISTLOCK_INC=""
  DISTLOCK_LIB=""
  for dir in $PHP_DISTLOCK /usr/local /usr; do
    test "$dir" = "yes" && continue
    if test -f "$dir/core/libdistlock.a"; then
      dnl A CMake build dir: the header is in the source tree it was configured from.
      src=`sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$dir/CMakeCache.txt" 2>/dev/null`
      if test -n "$src" && test -f "$src/core/include/distlock.h"; then
        DISTLOCK_INC="$src/core/include"
      elif test -f "$ext_srcdir/../core/include/distlock.h"; then
        DISTLOCK_INC="$ext_srcdir/../core/include"
      fi
      DISTLOCK_LIB="$dir/core/libdistlock.a"
      break
    fi
    for libdir in lib lib64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu; do
      if test -f "$dir/include/distlock.h" && test -f "$dir/$libdir/libdistlock.a"; then
        DISTLOCK_INC="$dir/include"
        DISTLOCK_LIB="$dir/$libdir/libdistlock.a"
        break 2
      fi
    done
  done
  if test -z "$DISTLOCK_INC" || test -z "$DISTLOCK_LIB"; then
    AC_MSG_RESULT([not found])
    AC_MSG_ERROR([libdistlock not found: pass --with-distlock=DIR, a CMake build dir of distlock or its install prefix (php-ext/build.sh does both steps)])
  fi
  AC_MSG_RESULT([$DISTLOCK_LIB])

  PKG_CHECK_MODULES([HIREDIS], [hiredis])

  PHP_ADD_INCLUDE($DISTLOCK_INC)
  PHP_EVAL_INCLINE($HIREDIS_CFLAGS)
  dnl The static archive goes in whole before hiredis, which it needs.
  dnl --exclude-libs: the core's symbols stay inside distlock.so, so another
  dnl module or library carrying its own libdistlock cannot clash with ours.
  DISTLOCK_SHARED_LIBADD="-Wl,--exclude-libs,libdistlock.a $DISTLOCK_LIB $HIREDIS_LIBS -lpthread"
  PHP_SUBST(DISTLOCK_SHARED_LIBADD)

  AC_DEFINE(HAVE_DISTLOCK, 1, [ Have distlock support ])
  dnl One file per job (php_distlock_int.h lists them), as php-src ext/random.
  PHP_NEW_EXTENSION(distlock, distlock.c distlock_client_cache.c distlock_errors.c distlock_compat.c distlock_client.c distlock_lock.c distlock_mask.c distlock_args.c, $ext_shared,, -DZEND_ENABLE_STATIC_TSRMLS_CACHE=1 -Wall)
  PHP_ADD_EXTENSION_DEP(distlock, spl)
fi
