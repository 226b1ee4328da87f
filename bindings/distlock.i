/*
 * distlock.i -- SWIG interface for the Python module distlock._core.
 *
 * It wraps only the public C API (core/include/distlock.h); everything
 * Pythonic (Client, Lock, context managers) lives in plain Python under
 * python/distlock/.
 *
 * Three rules shape this file:
 *  1. Errors become exceptions in ONE place: distlock_py_raise() below. The
 *     exception classes are defined in Python (distlock/_errors.py) and
 *     handed to C at import through distlock_py_set_errors(), as M2Crypto
 *     does with m2.ssl_init(SSLError, ...). A status < 0 raises the class
 *     registered for it, with distlock_strerror() and this thread's
 *     distlock_last_error() detail, which is read right after the failing
 *     call, before any other distlock call in this thread can overwrite it.
 *  2. The GIL is released only around calls that can block on the network
 *     (%threadallow); everything else keeps it (%nothreadallow globally).
 *  3. OUT pointers come back as return values; a status that can only be
 *     DISTLOCK_OK (or an error, which raises) is not returned at all.
 */
%module(threads="1") _core

%include <stdint.i>

%nothreadallow;
%threadallow distlock_acquire;
%threadallow distlock_release;
%threadallow distlock_extend;
%threadallow distlock_lock_free;
%threadallow distlock_lock_abandon;
%threadallow distlock_client_free;
%threadallow distlock_client_abandon;
%threadallow distlock_acquire_token;
%threadallow distlock_release_token;
%threadallow distlock_extend_token;
%threadallow distlock_admin_holder;
%threadallow distlock_admin_force_release;
%threadallow distlock_py_acquire_with;
%threadallow distlock_py_semaphore_acquire;
%threadallow distlock_py_acquire_many;
%threadallow distlock_multi_free;

%{
#include <string.h>
#include "distlock.h"

/* Exception classes registered by distlock/_errors.py: index = -status. */
#define DL_PY_NERR (1 - DISTLOCK_STATUS_MIN)
static PyObject *dl_py_base_error = NULL;
static PyObject *dl_py_errors[DL_PY_NERR];

/* The exception instance for status and detail (a new reference), or NULL
 * with an exception set. */
static PyObject *distlock_py_error(int status, const char *detail)
{
    PyObject *cls = NULL;
    const char *text = distlock_strerror(status);
    if (status < 0 && -status < DL_PY_NERR)
        cls = dl_py_errors[-status];
    if (cls == NULL)
        cls = dl_py_base_error;
    if (cls == NULL) {  /* module used before distlock/_errors.py ran */
        PyErr_Format(PyExc_RuntimeError, "distlock: %s%s%s (status %d)", text,
                     detail && *detail ? ": " : "", detail ? detail : "", status);
        return NULL;
    }
    /* Error(message, status, detail): the Python class builds the text. */
    return PyObject_CallFunction(cls, "sis", text, status, detail ? detail : "");
}

static void distlock_py_raise_msg(int status, const char *detail)
{
    PyObject *exc = distlock_py_error(status, detail);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
}

/* The single status -> exception mapping point for every wrapped call. */
static void distlock_py_raise(int status)
{
    distlock_py_raise_msg(status, distlock_last_error());
}

/* Strings in: str (encoded UTF-8) or bytes; an embedded NUL would silently
 * cut a key short, so it is refused with the EINVAL class. The pointer stays
 * valid while the argument tuple holds the object, including while the GIL
 * is released (str caches its UTF-8 form, bytes are immutable). */
static int distlock_py_cstr(PyObject *o, const char *what, int allow_none, const char **out)
{
    Py_ssize_t n = 0;
    const char *p = NULL;
    if (o == Py_None && allow_none) { *out = NULL; return 0; }
    if (PyUnicode_Check(o)) {
        p = PyUnicode_AsUTF8AndSize(o, &n);
        if (p == NULL) return -1;
    } else if (PyBytes_Check(o)) {
        char *b;
        if (PyBytes_AsStringAndSize(o, &b, &n) < 0) return -1;
        p = b;
    } else {
        PyErr_Format(PyExc_TypeError, "%s must be str or bytes, not %.100s",
                     what, Py_TYPE(o)->tp_name);
        return -1;
    }
    if ((size_t)n != strlen(p)) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s contains a NUL byte", what);
        distlock_py_raise_msg(DISTLOCK_EINVAL, msg);
        return -1;
    }
    *out = p;
    return 0;
}

/* Ctrl-C during a waiting acquire. Python's C-level signal handler only
 * sets a flag; the main thread, waiting in C with the GIL released, is woken
 * by the signal (EINTR) and the library calls this hook there, and before
 * each of its sleeps. It runs the Python signal handlers; one that raises
 * (KeyboardInterrupt) cancels the wait: the acquire returns
 * DISTLOCK_ECANCELED with that exception set, and it propagates. Only the
 * main thread runs Python signal handlers: elsewhere the hook says no at
 * once, without taking the GIL. */
static int distlock_py_interrupt(void *main_ident)
{
    if (PyThread_get_thread_ident() != (unsigned long)(uintptr_t)main_ident)
        return 0;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = PyErr_CheckSignals() < 0;
    PyGILState_Release(g);
    return stop;
}
%}

/* Called by distlock/_client.py for each client it makes, with
 * threading.main_thread().ident. */
%inline %{
static PyObject *distlock_py_catch_signals(distlock_client *c, unsigned long main_ident)
{
    if (distlock_client_on_interrupt(c, distlock_py_interrupt,
                                     (void *)(uintptr_t)main_ident) < 0) {
        distlock_py_raise(DISTLOCK_EINVAL);
        return NULL;
    }
    Py_RETURN_NONE;
}
%}

/* Called once by distlock/_errors.py: base class and {status: class}. */
%inline %{
static PyObject *distlock_py_set_errors(PyObject *base, PyObject *by_status)
{
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    if (!PyType_Check(base) || !PyDict_Check(by_status)) {
        PyErr_SetString(PyExc_TypeError, "distlock_py_set_errors(type, dict)");
        return NULL;
    }
    while (PyDict_Next(by_status, &pos, &k, &v)) {
        long st = PyLong_AsLong(k);
        if (st == -1 && PyErr_Occurred()) return NULL;
        if (st >= 0 || -st >= DL_PY_NERR || !PyType_Check(v)) {
            PyErr_Format(PyExc_ValueError, "bad status/class pair for %ld", st);
            return NULL;
        }
        Py_INCREF(v);
        Py_XSETREF(dl_py_errors[-st], v);
    }
    Py_INCREF(base);
    Py_XSETREF(dl_py_base_error, base);
    Py_RETURN_NONE;
}
%}

/* ------------------------------------------------------------ typemaps */
%typemap(in) const char *key, const char *servers, const char *resource {
    if (distlock_py_cstr($input, "$1_name", 0, (const char **)&$1) < 0) SWIG_fail;
}
%typemap(in) const char *token {
    if (distlock_py_cstr($input, "token", 0, (const char **)&$1) < 0) SWIG_fail;
}
%typemap(in) const char *owner, const char *value {
    if (distlock_py_cstr($input, "$1_name", 1, (const char **)&$1) < 0) SWIG_fail;
}
/* args->token of distlock_py_acquire_with: None for a fresh token */
%typemap(in) const char *lock_token {
    if (distlock_py_cstr($input, "token", 1, (const char **)&$1) < 0) SWIG_fail;
}

/* OUT handles: the caller (distlock/_client.py) owns and frees them. */
%typemap(in, numinputs=0) distlock_client **out (distlock_client *tmp = NULL) { $1 = &tmp; }
%typemap(argout) distlock_client **out {
    $result = SWIG_Python_AppendOutput($result,
        tmp$argnum ? SWIG_NewPointerObj(tmp$argnum, SWIGTYPE_p_distlock_client, 0)
                   : (Py_INCREF(Py_None), Py_None));
}
%typemap(in, numinputs=0) distlock_lock **out (distlock_lock *tmp = NULL) { $1 = &tmp; }
%typemap(argout) distlock_lock **out {
    $result = SWIG_Python_AppendOutput($result,
        tmp$argnum ? SWIG_NewPointerObj(tmp$argnum, SWIGTYPE_p_distlock_lock, 0)
                   : (Py_INCREF(Py_None), Py_None));
}

%typemap(in, numinputs=0) long *validity_ms (long tmp = 0) { $1 = &tmp; }
%typemap(argout) long *validity_ms {
    $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(tmp$argnum));
}
%typemap(in, numinputs=0) int *deleted (int tmp = 0) { $1 = &tmp; }
%typemap(argout) int *deleted {
    $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(tmp$argnum));
}

/* token_generate: returns the token string. */
%typemap(in, numinputs=0) (char *buf, size_t size) (char buf[64]) {
    buf[0] = '\0';
    $1 = buf;
    $2 = sizeof buf;
}
%typemap(argout) (char *buf, size_t size) {
    $result = SWIG_Python_AppendOutput($result, PyUnicode_FromString(buf$argnum));
}

/* Calls whose only non-error status is DISTLOCK_OK return just their OUT
 * values (or None); calls that can answer DISTLOCK_NOTACQUIRED (1) or, for
 * admin_holder, 0/1, return the status first. */
%typemap(out) int distlock_client_new, int distlock_client_set, int distlock_client_set_str,
              int distlock_extend, int distlock_extend_token, int distlock_token_generate,
              int distlock_admin_force_release, int distlock_release, int distlock_release_token,
              int distlock_client_cancel {
    $result = (Py_INCREF(Py_None), Py_None);
}

/* Rule 1: every status-returning call raises through distlock_py_raise(). */
%define DL_CHECKED(fn)
%exception fn {
    $action
    if (result < 0) { distlock_py_raise(result); SWIG_fail; }
}
%enddef
DL_CHECKED(distlock_client_new)
DL_CHECKED(distlock_client_set)
DL_CHECKED(distlock_client_set_str)
/* Waiting acquires: a Python exception raised by a signal handler while
 * waiting (distlock_py_interrupt) is the one to propagate. */
%define DL_CHECKED_INTERRUPTIBLE(fn)
%exception fn {
    $action
    if (result < 0) {
        if (!(result == DISTLOCK_ECANCELED && PyErr_Occurred()))
            distlock_py_raise(result);
        SWIG_fail;
    }
}
%enddef
DL_CHECKED_INTERRUPTIBLE(distlock_acquire)
DL_CHECKED(distlock_release)
DL_CHECKED(distlock_extend)
DL_CHECKED(distlock_acquire_token)
DL_CHECKED(distlock_release_token)
DL_CHECKED(distlock_extend_token)
DL_CHECKED(distlock_token_generate)
DL_CHECKED(distlock_admin_force_release)
DL_CHECKED(distlock_client_node_count)
DL_CHECKED(distlock_client_quorum)
DL_CHECKED(distlock_client_cancel)

/* ---- distlock_admin_holder / distlock_ttl_from_seconds ----
 * admin_holder(c, key, node) -> (status 0/1, token, nodes, pttl_ms,
 * answered, taken, kind, holders): the fields of its distlock_holder_info,
 * made here with its size; holder_kind_name(kind) -> str names `kind` (the
 * core's names, wrapped as declared). ttl_from_seconds(seconds) -> ttl_ms. */
%typemap(in, numinputs=0) distlock_holder_info *out (distlock_holder_info info) {
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    $1 = &info;
}
%typemap(argout) distlock_holder_info *out {
    $result = SWIG_Python_AppendOutput($result,
        PyUnicode_DecodeUTF8(info$argnum.token, (Py_ssize_t)strlen(info$argnum.token),
                             "surrogateescape"));
    $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(info$argnum.nodes));
    $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(info$argnum.pttl_ms));
    $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(info$argnum.answered));
    $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(info$argnum.taken));
    $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(info$argnum.kind));
    $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(info$argnum.holders));
}
%ignore distlock_holder_info;
%typemap(in, numinputs=0) long *ttl_ms (long tmp = 0) { $1 = &tmp; }
%typemap(argout) long *ttl_ms {
    $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(tmp$argnum));
}
%typemap(out) int distlock_ttl_from_seconds { $result = (Py_INCREF(Py_None), Py_None); }
DL_CHECKED(distlock_admin_holder)
DL_CHECKED(distlock_ttl_from_seconds)

/* ---- the option table: rows as tuples (name, id, type, min, max, default,
 * summary); an unknown name raises InvalidArgument with the core's detail
 * (which names it and the closest known name). The Client looks its keyword
 * arguments up here instead of keeping a list of its own. */
%ignore distlock_option_by_name;
%ignore distlock_option_by_id;
%ignore distlock_option_at;
%ignore distlock_option_info;
%{
static PyObject *distlock_py_option_row(const distlock_option_info *o)
{
    return Py_BuildValue("(siillls)", o->name, (int)o->id, (int)o->type, o->min, o->max,
                         o->default_value, o->summary);
}
%}
%inline %{
static PyObject *distlock_py_option(const char *name)
{
    const distlock_option_info *o = distlock_option_by_name(name);
    if (o == NULL) {
        distlock_py_raise(DISTLOCK_EINVAL);
        return NULL;
    }
    return distlock_py_option_row(o);
}
static PyObject *distlock_py_options(void)
{
    const distlock_option_info *o;
    PyObject *l = PyList_New(0);
    for (size_t i = 0; l && (o = distlock_option_at(i)) != NULL; i++) {
        PyObject *row = distlock_py_option_row(o);
        if (row == NULL || PyList_Append(l, row) < 0)
            Py_CLEAR(l);
        Py_XDECREF(row);
    }
    return l;
}
%}

/* ---- metrics: distlock_client_stats() as a dict
 * {name: value}, names as in the C header (labels included). */
%ignore distlock_client_stats;
%ignore distlock_stat;
%inline %{
static PyObject *distlock_py_stats(distlock_client *c)
{
    size_t n = 0, got = 0;
    int rc = distlock_client_stats(c, NULL, 0, &n);
    distlock_stat *e = rc == DISTLOCK_OK ? PyMem_Calloc(n ? n : 1, sizeof(*e)) : NULL;
    if (rc == DISTLOCK_OK && e == NULL)
        return PyErr_NoMemory();
    if (rc == DISTLOCK_OK)
        rc = distlock_client_stats(c, e, n, &got);
    if (rc != DISTLOCK_OK) {
        PyMem_Free(e);
        distlock_py_raise(rc);
        return NULL;
    }
    PyObject *d = PyDict_New();
    for (size_t k = 0; d && k < got; k++) {
        PyObject *v = PyLong_FromUnsignedLongLong((unsigned long long)e[k].value);
        if (v == NULL || PyDict_SetItemString(d, e[k].name, v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
    }
    PyMem_Free(e);
    return d;
}
%}

/* ---- lost leases and asyncio ----
 * Not wrapped: the lost callback (it runs on the renewal thread; the Python
 * layer watches the lost fd instead, from a thread of its own or from the
 * event loop: distlock/_lost.py, distlock/aio.py). */
%ignore distlock_lock_on_lost;
%ignore distlock_lost_fn;
%exception distlock_client_lost_fd {
    $action
    if (result < 0) { distlock_py_raise_msg(DISTLOCK_ESYS, distlock_last_error()); SWIG_fail; }
}

/* A call's own cancel (the asyncio layer: one per waiting acquire).
 * distlock_cancel_new() -> the cancel; distlock_cancel_fire(cancel) does not
 * block (an atomic exchange and a write()); distlock_cancel_free(cancel)
 * only once the call that carries it has returned. */
%typemap(in, numinputs=0) distlock_cancel **out (distlock_cancel *tmp = NULL) { $1 = &tmp; }
%typemap(argout) distlock_cancel **out {
    $result = SWIG_Python_AppendOutput($result,
        tmp$argnum ? SWIG_NewPointerObj(tmp$argnum, SWIGTYPE_p_distlock_cancel, 0)
                   : (Py_INCREF(Py_None), Py_None));
}
%typemap(out) int distlock_cancel_new, int distlock_cancel_fire {
    $result = (Py_INCREF(Py_None), Py_None);
}
DL_CHECKED(distlock_cancel_new)
DL_CHECKED(distlock_cancel_fire)

/* distlock_acquire_with() with its args as parameters (owner, cancel,
 * token: None for none). With a cancel, ECANCELED is an answer here, not an
 * exception: the caller knows whether it fired the cancel (a task
 * cancelled) or closed the client; without one (the blocking layer) it is
 * the waiting acquire's (see DL_CHECKED_WITH_CANCEL below). */
%ignore distlock_acquire_with;
%ignore distlock_acquire_args;

/* The blocking Lock's release(): distlock_release(), and once it succeeded
 * distlock_lock_lost() of the handle, in one call: returns the lost flag
 * (0/1); an error raises (DISTLOCK_ENOTOWNER: LockLost). The handle stays
 * the caller's to free: a signal handler's exception can land between this
 * call and the caller's next line, and a handle freed in here would then
 * still be held by the Lock. */
%threadallow distlock_py_release;
%typemap(out) int distlock_py_release { $result = PyBool_FromLong(result); }
DL_CHECKED(distlock_py_release)
%inline %{
static int distlock_py_release(distlock_lock *lock)
{
    int rc = distlock_release(lock);
    return rc == DISTLOCK_OK ? distlock_lock_lost(lock) : rc;
}
%}

/* distlock_lock_restore(c, key, token) -> the handle (no I/O). */
%typemap(out) int distlock_lock_restore { $result = (Py_INCREF(Py_None), Py_None); }
DL_CHECKED(distlock_lock_restore)

/* ---- semaphores and several keys (distlock_semaphore_acquire,
 * distlock_acquire_many) with their args as parameters, as
 * distlock_py_acquire_with above: cancel None for none. The blocking
 * layer passes None and gets the waiting acquire's behaviour (Ctrl-C: the
 * signal handler's exception propagates); the asyncio layer passes its
 * cancel and reads ECANCELED as an answer. */
%ignore distlock_semaphore_acquire;
%ignore distlock_acquire_many;
%define DL_CHECKED_WITH_CANCEL(fn, cancel_arg)
%exception fn {
    $action
    if (result < 0) {
        if (result == DISTLOCK_ECANCELED && PyErr_Occurred())
            SWIG_fail;  /* a signal handler raised while waiting: that one */
        if (result != DISTLOCK_ECANCELED || cancel_arg == NULL) {
            distlock_py_raise(result);
            SWIG_fail;
        }
    }
}
%enddef
DL_CHECKED_WITH_CANCEL(distlock_py_acquire_with, arg7)
DL_CHECKED_WITH_CANCEL(distlock_py_semaphore_acquire, arg7)
DL_CHECKED_WITH_CANCEL(distlock_py_acquire_many, arg7)

/* A key list in: any sequence of str/bytes but a str or bytes itself (that
 * would be a list of one-letter keys), held as a tuple for the call, so the
 * pointers stay valid while the GIL is released even if the caller's list
 * changes meanwhile. Count and contents are the core's to check. */
%typemap(in) (const char *const *keys, size_t nkeys) (PyObject *seq = NULL, const char **arr = NULL) {
    Py_ssize_t i, n;
    if (PyUnicode_Check($input) || PyBytes_Check($input)) {
        PyErr_SetString(PyExc_TypeError, "keys must be a list of str or bytes, not a single key");
        SWIG_fail;
    }
    seq = PySequence_Tuple($input);
    if (seq == NULL) SWIG_fail;
    n = PyTuple_GET_SIZE(seq);
    arr = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof *arr);
    if (arr == NULL) { PyErr_NoMemory(); SWIG_fail; }
    for (i = 0; i < n; i++)
        if (distlock_py_cstr(PyTuple_GET_ITEM(seq, i), "key", 0, &arr[i]) < 0) SWIG_fail;
    $1 = (const char *const *)arr;
    $2 = (size_t)n;
}
%typemap(freearg) (const char *const *keys, size_t nkeys) {
    PyMem_Free((void *)arr$argnum);
    Py_XDECREF(seq$argnum);
}

%inline %{
static int distlock_py_semaphore_acquire(distlock_client *c, const char *key, long permits,
                                         long ttl_ms, long wait_ms, unsigned flags,
                                         distlock_cancel *cancel, distlock_lock **out)
{
    distlock_acquire_args a = { .size = sizeof a, .cancel = cancel };
    return distlock_semaphore_acquire(c, key, permits, ttl_ms, wait_ms, flags, &a, out);
}

static int distlock_py_acquire_many(distlock_client *c, const char *const *keys, size_t nkeys,
                                    long ttl_ms, long wait_ms, unsigned flags,
                                    distlock_cancel *cancel, distlock_lock **out)
{
    distlock_acquire_args a = { .size = sizeof a, .cancel = cancel };
    return distlock_acquire_many(c, keys, nkeys, ttl_ms, wait_ms, flags, &a, out);
}
%}


%inline %{
static int distlock_py_acquire_with(distlock_client *c, const char *key, long ttl_ms,
                                    long wait_ms, unsigned flags, const char *owner,
                                    distlock_cancel *cancel, const char *lock_token,
                                    distlock_lock **out)
{
    distlock_acquire_args a = { .size = sizeof a, .owner = owner, .cancel = cancel,
                                .token = lock_token };
    return distlock_acquire_with(c, key, ttl_ms, wait_ms, flags, &a, out);
}

/* PyThreadState_SetAsyncExc: raise exc (a class) in the thread whose
 * ident is given, at its next Python instruction; None clears one pending.
 * Returns the number of threads it was set in (0 or 1). */
static int distlock_py_async_raise(unsigned long ident, PyObject *exc)
{
    return PyThreadState_SetAsyncExc(ident, exc == Py_None ? NULL : exc);
}

/* An exception with nowhere to go (an on_lost callback's, in the lost
 * watcher's thread or the event loop) to sys.unraisablehook, as the
 * interpreter reports one raised by a finalizer: "Exception ignored in
 * <where>", obj as the hook's object. Through the interpreter, because its
 * own hook (the one programs run with) takes only its UnraisableHookArgs,
 * which Python code cannot make. Never raises: the caller carries on. */
static PyObject *distlock_py_report_unraisable(PyObject *exc, PyObject *where, PyObject *obj)
{
    if (!PyExceptionInstance_Check(exc) || !PyUnicode_Check(where)) {
        PyErr_SetString(PyExc_TypeError, "distlock_py_report_unraisable(exception, str, object)");
        PyErr_WriteUnraisable(obj);
        Py_RETURN_NONE;
    }
    PyObject *tb = PyException_GetTraceback(exc);  /* new reference or NULL */
#if PY_VERSION_HEX >= 0x030D0000
    Py_INCREF(Py_TYPE(exc));
    Py_INCREF(exc);
    PyErr_Restore((PyObject *)Py_TYPE(exc), exc, tb);
    PyErr_FormatUnraisable("Exception ignored in %U", where);
    (void)obj;  /* the 3.13 API names no object */
#else
    /* made before the error is set: the hook's err_msg is "Exception
     * ignored " and this; without it, "Exception ignored in: <obj>" */
    PyObject *msg = PyUnicode_FromFormat("in %U", where);
    const char *m = msg ? PyUnicode_AsUTF8(msg) : NULL;
    if (m == NULL)
        PyErr_Clear();
    Py_INCREF(Py_TYPE(exc));
    Py_INCREF(exc);
    PyErr_Restore((PyObject *)Py_TYPE(exc), exc, tb);
    _PyErr_WriteUnraisableMsg(m, obj);
    Py_XDECREF(msg);
#endif
    Py_RETURN_NONE;
}
%}
/* Cancellation: the Python layer installs its own interrupt hook
 * (distlock_py_catch_signals above). */
/* ---- listing (the CLI's `list` and `status --json`): not wrapped yet; a
 * Python client.list()/scan would be a dict-returning helper like stats(). */
%ignore distlock_admin_scan;
%ignore distlock_key_fn;
%ignore distlock_admin_fence;
/* owner metadata: read with `distlock status` (the C API distlock_admin_owner);
 * Python turns it on with Client(owner_info=..., owner_label=...) */
%ignore distlock_admin_owner;
%ignore distlock_owner_info;
%ignore distlock_client_on_interrupt;
%ignore distlock_interrupt_fn;
/* Not wrapped yet: a Redis Cluster node's route of a key (`distlock status`
 * shows it; the Python layer has no status view). */
%ignore distlock_admin_cluster_route;
/* A server list as messages show it: for front ends that echo one (the CLI,
 * PHP's phpinfo()); the Python layer shows only the library's texts. */
%ignore distlock_servers_mask;


/* ---- the non-blocking API, for distlock.aio: one distlock_multi per
 * asyncio client, driven by its event loop. No C callback into Python: the
 * loop watches distlock_multi_fd() (loop.add_reader), calls
 * distlock_multi_perform() when it is readable or when
 * distlock_multi_timeout() is due (loop.call_at), and collects what finished
 * with distlock_multi_done(), matching each op to its future by
 * distlock_op_id(). None of these calls block (the GIL is kept), but
 * distlock_multi_free(), which may release locks won by cancelled ops.
 * Ops are freed by the Python layer (distlock_op_free) once read. */
%typemap(in, numinputs=0) distlock_multi **out (distlock_multi *tmp = NULL) { $1 = &tmp; }
%typemap(argout) distlock_multi **out {
    $result = SWIG_Python_AppendOutput($result,
        tmp$argnum ? SWIG_NewPointerObj(tmp$argnum, SWIGTYPE_p_distlock_multi, 0)
                   : (Py_INCREF(Py_None), Py_None));
}
%typemap(in, numinputs=0) distlock_op **out (distlock_op *tmp = NULL) { $1 = &tmp; }
%typemap(argout) distlock_op **out {
    $result = SWIG_Python_AppendOutput($result,
        tmp$argnum ? SWIG_NewPointerObj(tmp$argnum, SWIGTYPE_p_distlock_op, 0)
                   : (Py_INCREF(Py_None), Py_None));
}
/* Starting an op: its OUT op, or the start's error raised (argument checks,
 * a closed client, DISTLOCK_REENTRANT refused by the multi). */
%typemap(out) int distlock_multi_new, int distlock_multi_release, int distlock_multi_extend,
              int distlock_multi_semaphore_acquire, int distlock_py_multi_acquire {
    $result = (Py_INCREF(Py_None), Py_None);
}
DL_CHECKED(distlock_multi_new)
DL_CHECKED(distlock_multi_fd)
DL_CHECKED(distlock_multi_perform)
DL_CHECKED(distlock_multi_release)
DL_CHECKED(distlock_multi_extend)
DL_CHECKED(distlock_multi_semaphore_acquire)
DL_CHECKED(distlock_py_multi_acquire)
/* Wrapped by the helpers below (args as parameters; an op's outcome as one
 * tuple). */
%ignore distlock_multi_acquire;
%ignore distlock_op_status;
%ignore distlock_op_error;
%ignore distlock_op_take_lock;

%inline %{
/* distlock_multi_acquire() with its args as parameters: lock_token None for
 * a fresh token. No owner (the multi refuses DISTLOCK_REENTRANT), no cancel
 * (an op is cancelled with distlock_op_cancel()). */
static int distlock_py_multi_acquire(distlock_multi *m, const char *key, long ttl_ms,
                                     long wait_ms, unsigned flags, const char *lock_token,
                                     distlock_op **out)
{
    distlock_acquire_args a = { .size = sizeof a, .token = lock_token };
    return distlock_multi_acquire(m, key, ttl_ms, wait_ms, flags, &a, out);
}

/* A finished op's outcome: (status, lock handle or None, error or None).
 * The handle is taken (the caller owns it); the error is the exception the
 * blocking call would raise (its class by status, the op's own detail),
 * made, not raised: the caller sets it on the awaiting future. An acquire's
 * refusal (DISTLOCK_NOTACQUIRED) comes with its detail as a str in the
 * error's place. */
static PyObject *distlock_py_op_outcome(distlock_op *op)
{
    int st = distlock_op_status(op);
    const char *detail = distlock_op_error(op);
    PyObject *err, *lock, *t;
    if (st < 0)
        err = distlock_py_error(st, detail);
    else if (st == DISTLOCK_NOTACQUIRED)
        err = PyUnicode_DecodeUTF8(detail ? detail : "", (Py_ssize_t)strlen(detail ? detail : ""),
                                   "surrogateescape");
    else
        err = (Py_INCREF(Py_None), Py_None);
    if (err == NULL)
        return NULL;
    t = PyTuple_New(3);
    PyObject *code = PyLong_FromLong(st);
    if (t == NULL || code == NULL) {
        Py_XDECREF(t);
        Py_XDECREF(code);
        Py_DECREF(err);
        return NULL;
    }
    /* taken last: nothing can fail once the op has given its handle up */
    distlock_lock *l = distlock_op_take_lock(op);
    lock = l ? SWIG_NewPointerObj(l, SWIGTYPE_p_distlock_lock, 0) : (Py_INCREF(Py_None), Py_None);
    if (lock == NULL) {  /* no memory for the wrapper: the lock is given back */
        distlock_lock_free(l);
        Py_DECREF(t);
        Py_DECREF(code);
        Py_DECREF(err);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, code);
    PyTuple_SET_ITEM(t, 1, lock);
    PyTuple_SET_ITEM(t, 2, err);
    return t;
}
%}

/* ---- distlock.Lock's state, acquire and release in C.
 *
 * distlock/_client.py's Lock derives from LockBase: the state every Lock
 * has lives here, read and written from Python as the same attributes
 * (self._h, self._local, ...; member descriptors), so every method written
 * in Python sees one state. _init, acquire, release, __enter__, __exit__,
 * _c_acquire and the finalizer are here, whole: a Lock's acquire and
 * release exist once, in C. What is Python's stays in _client.py and is
 * called from here: the messages (_release_refused, _not_acquired), the
 * TTL and wait rules (_ttl_ms, _wait_ms), the lost watcher, a reentrant
 * lock's nested acquire (_acquire_again), a subclass's own _c_acquire
 * (Semaphore, MultiLock) and a Lock collected while held
 * (_finalize_held). The reason is cost: a lock made, taken and released
 * per call, as `with client.lock(key):` does, ran ~20,000 interpreter
 * instructions in Python per pair, ~5,500 here. */
%{
#include <limits.h>
#include <math.h>
#include <structmember.h>
#include <pythread.h>

/* _core.Mutex: threading.Lock's behaviour (acquire(blocking=True,
 * timeout=-1), release(), locked(), with), as a Lock's local mutex and
 * handle mutex: the C code below takes and frees it without a method call.
 * A blocking acquire waits with the GIL released and runs the signal
 * handlers when a signal interrupts it, as threading.Lock does (Ctrl-C in
 * the main thread raises there). */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    char locked;
} dl_py_mutex;

static PyTypeObject dl_mutex_type;

/* Free PyThread locks, unlocked, for the next Mutex: a Lock makes two
 * and drops them with it, and making one is a malloc and a sem_init.
 * Touched with the GIL held only (new and dealloc). */
#define DL_SPARE_LOCKS 16
static PyThread_type_lock dl_spare_locks[DL_SPARE_LOCKS];
static int dl_nspare;

static PyObject *dl_mutex_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if ((args && PyTuple_GET_SIZE(args)) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Mutex() takes no arguments");
        return NULL;
    }
    dl_py_mutex *self = (dl_py_mutex *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = dl_nspare > 0 ? dl_spare_locks[--dl_nspare] : PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_MemoryError, "can't allocate lock");
        return NULL;
    }
    return (PyObject *)self;
}

static void dl_mutex_dealloc(dl_py_mutex *self)
{
    if (self->lock != NULL) {
        if (self->locked)
            PyThread_release_lock(self->lock);
        /* nobody waits on it: a waiter holds a reference to self */
        if (dl_nspare < DL_SPARE_LOCKS)
            dl_spare_locks[dl_nspare++] = self->lock;
        else
            PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Without blocking: 1 taken, 0 not. */
static int dl_mutex_try(dl_py_mutex *m)
{
    if (PyThread_acquire_lock_timed(m->lock, 0, 0) != PY_LOCK_ACQUIRED)
        return 0;
    m->locked = 1;
    return 1;
}

/* Waiting up to timeout_us (-1: no limit): 1 taken, 0 not, -1 with the
 * exception a signal handler raised. */
static int dl_mutex_wait(dl_py_mutex *m, long long timeout_us)
{
    if (dl_mutex_try(m))
        return 1;
    if (timeout_us == 0)
        return 0;
    PyLockStatus r;
    long long deadline = 0;
    struct timespec ts;
    if (timeout_us > 0) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        deadline = (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 + timeout_us;
    }
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        r = PyThread_acquire_lock_timed(m->lock, timeout_us, 1);
        Py_END_ALLOW_THREADS
        if (r != PY_LOCK_INTR)
            break;
        if (Py_MakePendingCalls() < 0)
            return -1;
        if (timeout_us > 0) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            timeout_us = deadline - ((long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
            if (timeout_us <= 0) {
                r = PyThread_acquire_lock_timed(m->lock, 0, 0);
                break;
            }
        }
    }
    if (r != PY_LOCK_ACQUIRED)
        return 0;
    m->locked = 1;
    return 1;
}

static int dl_mutex_release_c(dl_py_mutex *m)
{
    if (!m->locked) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return -1;
    }
    m->locked = 0;
    PyThread_release_lock(m->lock);
    return 0;
}

static PyObject *dl_mutex_acquire(dl_py_mutex *self, PyObject *args, PyObject *kwds)
{
    static char *kw[] = { "blocking", "timeout", NULL };
    int blocking = 1;
    PyObject *timeout = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pO:acquire", kw, &blocking, &timeout))
        return NULL;
    long long us = -1;
    if (timeout != NULL) {
        double t = PyFloat_AsDouble(timeout);
        if (t == -1.0 && PyErr_Occurred())
            return NULL;
        if (isnan(t)) {  /* every comparison below is false for it: a wait without end */
            PyErr_SetString(PyExc_ValueError, "Invalid value NaN (not a number)");
            return NULL;
        }
        if (!blocking && t != -1.0) {
            PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
            return NULL;
        }
        if (t < 0 && t != -1.0) {
            PyErr_SetString(PyExc_ValueError, "timeout value must be positive");
            return NULL;
        }
        if (t >= 0) {
            if (!(t * 1e6 <= (double)PY_TIMEOUT_MAX)) {
                PyErr_SetString(PyExc_OverflowError, "timeout value is too large");
                return NULL;
            }
            us = (long long)(t * 1e6 + 0.999999);  /* rounded up, as threading's */
        }
    }
    if (!blocking)
        us = 0;
    int got = dl_mutex_wait(self, us);
    if (got < 0)
        return NULL;
    return PyBool_FromLong(got);
}

static PyObject *dl_mutex_release(dl_py_mutex *self, PyObject *unused)
{
    (void)unused;
    if (dl_mutex_release_c(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *dl_mutex_exit(dl_py_mutex *self, PyObject *args)
{
    (void)args;
    return dl_mutex_release(self, NULL);
}

static PyObject *dl_mutex_locked(dl_py_mutex *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(self->locked);
}

static PyMethodDef dl_mutex_methods[] = {
    { "acquire", (PyCFunction)(void (*)(void))dl_mutex_acquire, METH_VARARGS | METH_KEYWORDS,
      "acquire(blocking=True, timeout=-1) -> bool, as threading.Lock's." },
    { "__enter__", (PyCFunction)(void (*)(void))dl_mutex_acquire, METH_VARARGS | METH_KEYWORDS,
      "acquire()" },
    { "release", (PyCFunction)dl_mutex_release, METH_NOARGS, "release(), as threading.Lock's." },
    { "__exit__", (PyCFunction)dl_mutex_exit, METH_VARARGS, "release()" },
    { "locked", (PyCFunction)dl_mutex_locked, METH_NOARGS, "True while held." },
    { NULL, NULL, 0, NULL }
};

static PyTypeObject dl_mutex_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "distlock._core.Mutex",
    .tp_basicsize = sizeof(dl_py_mutex),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A mutex that behaves as threading.Lock (a distlock.Lock's local mutexes).",
    .tp_new = dl_mutex_new,
    .tp_dealloc = (destructor)dl_mutex_dealloc,
    .tp_methods = dl_mutex_methods,
};

/* A list through the objects it links (a Client's Locks): no allocation
 * to join or leave it. */
typedef struct dl_link {
    struct dl_link *prev, *next;  /* NULL: not in a list */
} dl_link;

/* _core.CallCount: a Client's calls in progress (Client._inflight), with
 * the two deque methods its Python code uses, append(x) and pop(), and
 * len(); the C code below counts without a method call. It also keeps
 * the client's state that a call reads around its count: `closed`
 * (Client._closed), `h` (Client._h, the C client's handle, with its
 * pointer) and the client's Locks (`locks`, Client._locks: close() drops
 * their handles), so that a Lock, which keeps its client's CallCount,
 * reads them without an attribute lookup. Each Lock links itself in when
 * made and out when finalized (it holds a reference to the CallCount, so
 * the list's head outlives every Lock in it); the GIL guards the list. */
typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    char closed;
    PyObject *h;            /* the SWIG handle or NULL (None) */
    distlock_client *cp;    /* h's pointer */
    dl_link locks;          /* head; prev and next NULL until the first */
} dl_py_count;

static PyTypeObject dl_count_type;

/* The CallCounts this thread is inside, innermost last: a close() made
 * from inside a call of its own client (a signal handler that runs in the
 * library's wait, distlock_py_interrupt) must not wait for that call, which
 * can only end after the handler returns (CallCount.inside tells it).
 * Pushed by every count-up and taken out by every count-down of this
 * thread: the latest entry of that count, so calls that end in another
 * order than they began keep the right entries. Deeper nesting than
 * DL_INSIDE_MAX is only counted (dl_inside_over): a close() from there may
 * not see its own call and waits for it, as it did before. */
#define DL_INSIDE_MAX 32
static _Thread_local dl_py_count *dl_inside[DL_INSIDE_MAX];
static _Thread_local int dl_inside_n, dl_inside_over;

static void dl_inside_push(dl_py_count *ic)
{
    if (dl_inside_n < DL_INSIDE_MAX)
        dl_inside[dl_inside_n++] = ic;
    else
        dl_inside_over++;
}

static void dl_inside_pop(dl_py_count *ic)
{
    for (int i = dl_inside_n - 1; i >= 0; i--)
        if (dl_inside[i] == ic) {
            for (; i < dl_inside_n - 1; i++)
                dl_inside[i] = dl_inside[i + 1];
            dl_inside_n--;
            return;
        }
    if (dl_inside_over > 0)
        dl_inside_over--;
    /* else a count-down this thread did not count up: the fork handler's
     * reset, or a call that ended in another thread than it began */
}

/* This thread's calls of ic in progress (as far as recorded). */
static Py_ssize_t dl_inside_of(dl_py_count *ic)
{
    Py_ssize_t k = 0;
    for (int i = 0; i < dl_inside_n; i++)
        k += dl_inside[i] == ic;
    return k;
}

static PyObject *dl_count_append(dl_py_count *self, PyObject *x)
{
    (void)x;
    self->n++;
    dl_inside_push(self);
    Py_RETURN_NONE;
}

/* One call less; never below 0: a forked child forgets the calls of its
 * parent's other threads (distlock/_client.py), and the call its forking
 * thread was in still ends there. */
static void dl_count_down(dl_py_count *self)
{
    if (self->n > 0)
        self->n--;
}

static PyObject *dl_count_pop(dl_py_count *self, PyObject *unused)
{
    (void)unused;
    dl_count_down(self);
    dl_inside_pop(self);
    Py_RETURN_NONE;
}

/* In a forked child, whose only thread is the one that forked: the calls
 * of the parent's other threads never end here, so the count keeps only
 * this thread's own (which do end, and which a close() made inside one of
 * them must still see as its own). */
static PyObject *dl_count_forget_other_threads(dl_py_count *self, PyObject *unused)
{
    (void)unused;
    self->n = dl_inside_of(self);
    Py_RETURN_NONE;
}

static PyObject *dl_count_get_inside(dl_py_count *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(dl_inside_of(self) > 0);
}

static Py_ssize_t dl_count_len(dl_py_count *self)
{
    return self->n;
}

static void dl_count_dealloc(dl_py_count *self)
{
    Py_CLEAR(self->h);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *dl_count_get_h(dl_py_count *self, void *unused)
{
    (void)unused;
    PyObject *h = self->h ? self->h : Py_None;
    Py_INCREF(h);
    return h;
}

/* None, or a distlock_client handle (what distlock_client_new returned). */
static int dl_count_set_h(dl_py_count *self, PyObject *v, void *unused)
{
    (void)unused;
    void *p = NULL;
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "a CallCount's h can't be deleted");
        return -1;
    }
    if (v != Py_None &&
        (!SWIG_IsOK(SWIG_ConvertPtr(v, &p, SWIGTYPE_p_distlock_client, 0)) || p == NULL)) {
        PyErr_SetString(PyExc_TypeError, "h must be None or a distlock_client handle");
        return -1;
    }
    Py_XSETREF(self->h, v == Py_None ? NULL : (Py_INCREF(v), v));
    self->cp = p;
    return 0;
}

static PyObject *dl_count_get_locks(dl_py_count *self, void *unused);

static PyGetSetDef dl_count_getset[] = {
    { "h", (getter)dl_count_get_h, (setter)dl_count_set_h,
      "The client's C handle (Client._h), or None.", NULL },
    { "locks", (getter)dl_count_get_locks, NULL,
      "The client's Locks not yet finalized, as a new list (Client._locks).", NULL },
    { "inside", (getter)dl_count_get_inside, NULL,
      "True while this thread is inside a call of the client.", NULL },
    { NULL, NULL, NULL, NULL, NULL }
};

static PyMemberDef dl_count_members[] = {
    { "closed", T_BOOL, offsetof(dl_py_count, closed), 0, "Client._closed." },
    { NULL, 0, 0, 0, NULL }
};

static PyMethodDef dl_count_methods[] = {
    { "append", (PyCFunction)dl_count_append, METH_O, "One more call in progress." },
    { "pop", (PyCFunction)dl_count_pop, METH_NOARGS, "One call less in progress." },
    { "forget_other_threads", (PyCFunction)dl_count_forget_other_threads, METH_NOARGS,
      "In a forked child: count only this thread's calls in progress." },
    { NULL, NULL, 0, NULL }
};

static PySequenceMethods dl_count_seq = { .sq_length = (lenfunc)dl_count_len };

static PyTypeObject dl_count_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "distlock._core.CallCount",
    .tp_basicsize = sizeof(dl_py_count),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A client's calls in progress: append(None) and pop(), len() of them; "
              "its closed flag, C handle and Locks.",
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)dl_count_dealloc,
    .tp_methods = dl_count_methods,
    .tp_members = dl_count_members,
    .tp_getset = dl_count_getset,
    .tp_as_sequence = &dl_count_seq,
};

typedef struct {
    PyObject_HEAD
    PyObject *client, *key, *token, *ttl_ms, *wait_ms, *flags, *local, *reentrant, *outer,
             *hm, *on_lost, *h, *retry, *was_lost, *lost_seen, *owner_ident,
             *refused_detail;
    dl_py_count *count;  /* client._inflight, set by _init */
    dl_link link;        /* in count->locks, from _init until finalized */
} dl_py_lock;

/* The Lock out of its client's list (again: nothing). */
static void dl_lock_unlink(dl_py_lock *self)
{
    dl_link *k = &self->link;
    if (k->next != NULL) {
        k->prev->next = k->next;
        k->next->prev = k->prev;
        k->prev = k->next = NULL;
    }
}

/* Not a Lock being deallocated (no reference left): a subclass's __del__
 * that does not call LockBase's finalizer leaves it linked until its
 * memory goes, and its weak references' callbacks run before that (a
 * weakref.finalize that closes the client); a reference handed out then
 * would outlive the Lock. A set of weak references was cleared first. */
static PyObject *dl_count_get_locks(dl_py_count *self, void *unused)
{
    (void)unused;
    PyObject *out = PyList_New(0);
    for (dl_link *k = self->locks.next; out != NULL && k != NULL && k != &self->locks;
         k = k->next) {
        PyObject *o = (PyObject *)((char *)k - offsetof(dl_py_lock, link));
        if (Py_REFCNT(o) > 0 && PyList_Append(out, o) < 0)
            Py_CLEAR(out);
    }
    return out;
}

/* Given once by distlock/_client.py (lock_setup). */
static struct {
    PyObject *client_cls, *lock_cls, *ttl_memo, *ttl_ms_fn, *wait_ms_fn, *check_key_fn,
             *lock_lost_cls, *forever, *minus_one;
} dl_lk;

static PyObject *s_acquire, *s_release, *s_inflight, *s_finalize_held, *s_wake_closer,
                *s_not_acquired, *s_name;

#if PY_VERSION_HEX < 0x03090000
#define dl_call0(o, name) PyObject_CallMethodObjArgs((o), (name), NULL)
#else
#define dl_call0(o, name) PyObject_CallMethodNoArgs((o), (name))
#endif
#define dl_is_type(o, t) (Py_TYPE(o) == (PyTypeObject *)(t))

/* A method call whose result is not needed: 0, or -1 with an exception. */
static int dl_do0(PyObject *o, PyObject *name)
{
    PyObject *r = dl_call0(o, name);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

static void dl_set(PyObject **slot, PyObject *v)
{
    Py_INCREF(v);
    Py_XSETREF(*slot, v);
}

/* A Lock's Mutex (_init makes them, dl_missing checks them) taken
 * waiting: 0, or -1 with a signal handler's exception; released. */
static int dl_lock_wait(PyObject *mu)
{
    return dl_mutex_wait((dl_py_mutex *)mu, -1) > 0 ? 0 : -1;
}

static int dl_unlock(PyObject *mu)
{
    return dl_mutex_release_c((dl_py_mutex *)mu);
}

/* dl_unlock, keeping an exception already set (the error paths). */
static void dl_unlock_keep(PyObject *mu)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    if (dl_unlock(mu) < 0)
        PyErr_WriteUnraisable(mu);
    PyErr_Restore(t, v, tb);
}

/* client._inflight (a new reference), or NULL with an exception. */
static dl_py_count *dl_count_of(PyObject *client)
{
    PyObject *inflight = PyObject_GetAttr(client, s_inflight);
    if (inflight != NULL && Py_TYPE(inflight) != &dl_count_type) {
        Py_CLEAR(inflight);
        PyErr_SetString(PyExc_TypeError, "distlock: the client's _inflight is not a CallCount");
    }
    return (dl_py_count *)inflight;
}

/* Client._call's accounting (see Client._enter): count one more call in
 * progress, then read the closed flag (1: closed, the caller backs out).
 * The GIL orders both against close(), which sets the flag and then waits
 * for the count to fall to 0. */
static int dl_enter_count(dl_py_count *ic)
{
    ic->n++;
    dl_inside_push(ic);
    return ic->closed;
}

/* Client._leave: one call less, and wake a close() that may be waiting.
 * Keeps an exception already set. */
static void dl_leave_count(PyObject *client, dl_py_count *ic)
{
    dl_count_down(ic);  /* dl_enter_count counted it */
    dl_inside_pop(ic);
    if (ic->closed) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        if (dl_do0(client, s_wake_closer) < 0)
            PyErr_WriteUnraisable(client);
        PyErr_Restore(t, v, tb);
    }
}

/* The same for a caller without the client's CallCount at hand: returns it
 * (a new reference, for dl_leave) and sets *closed, or NULL with an
 * exception. */
static PyObject *dl_enter(PyObject *client, int *closed)
{
    dl_py_count *ic = dl_count_of(client);
    if (ic != NULL)
        *closed = dl_enter_count(ic);
    return (PyObject *)ic;
}

/* Steals the reference to inflight. */
static void dl_leave(PyObject *client, PyObject *inflight)
{
    dl_leave_count(client, (dl_py_count *)inflight);
    Py_DECREF(inflight);
}

/* A METH_FASTCALL | METH_KEYWORDS method's arguments bound to names[0..n-1]
 * as a def binds them: the first npos may come by position, the first nreq
 * must come; out[k] gets the k-th one, or keeps what it holds (its
 * default). 0, or -1 with the TypeError a def's call would raise. fn names
 * the method ("acquire()"); the counts include self, as Python's do.
 * ids[k], when not NULL, is names[k] interned: a call site's keyword names
 * are interned too, so most are found by identity, without a comparison
 * of text. */
static int dl_bind_args(const char *fn, const char *const *names, PyObject *const *ids, int n,
                        int npos, int nreq, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames, PyObject **out)
{
    unsigned long given = 0;  /* n <= 32 */
    if (nargs > npos) {
        PyErr_Format(PyExc_TypeError, "%s takes from %d to %d positional arguments but %zd "
                     "were given", fn, nreq + 1, npos + 1, nargs + 1);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        out[i] = args[i];
        given |= 1UL << i;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        int k = -1;
        for (int j = 0; ids != NULL && j < n && k < 0; j++)
            if (ids[j] == name)
                k = j;
        for (int j = 0; j < n && k < 0; j++)
            if (PyUnicode_CompareWithASCIIString(name, names[j]) == 0)
                k = j;
        if (k < 0) {
            PyErr_Format(PyExc_TypeError, "%s got an unexpected keyword argument '%S'", fn, name);
            return -1;
        }
        if (given & (1UL << k)) {
            PyErr_Format(PyExc_TypeError, "%s got multiple values for argument '%s'", fn,
                         names[k]);
            return -1;
        }
        out[k] = args[nargs + i];
        given |= 1UL << k;
    }
    for (int k = 0; k < nreq; k++)
        if (!(given & (1UL << k))) {
            PyErr_Format(PyExc_TypeError, "%s missing 1 required positional argument: '%s'", fn,
                         names[k]);
            return -1;
        }
    return 0;
}

static int dl_handle(PyObject *o, distlock_lock **out)
{
    void *p = NULL;
    if (!SWIG_IsOK(SWIG_ConvertPtr(o, &p, SWIGTYPE_p_distlock_lock, 0)) || p == NULL) {
        PyErr_SetString(PyExc_TypeError, "distlock: a lock handle was expected");
        return -1;
    }
    *out = p;
    return 0;
}

static void dl_free_handle(distlock_lock *l)
{
    Py_BEGIN_ALLOW_THREADS
    distlock_lock_free(l);
    Py_END_ALLOW_THREADS
}

static PyObject *dl_lock_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;  /* Lock(...) passes its arguments on to __init__ */
    if (dl_lk.lock_cls == NULL || !PyType_IsSubtype(type, (PyTypeObject *)dl_lk.lock_cls)) {
        PyErr_SetString(PyExc_TypeError, "LockBase is distlock.Lock's base: make a distlock.Lock");
        return NULL;
    }
    dl_py_lock *self = (dl_py_lock *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    /* what the Python class had as class attributes */
    dl_set(&self->h, Py_None);
    dl_set(&self->retry, Py_False);
    dl_set(&self->was_lost, Py_False);
    dl_set(&self->lost_seen, Py_False);
    dl_set(&self->owner_ident, Py_None);
    dl_set(&self->refused_detail, Py_None);
    PyObject *empty = PyUnicode_FromString("");
    if (empty == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    Py_XSETREF(self->refused_detail, empty);
    return (PyObject *)self;
}

static int dl_lock_traverse(dl_py_lock *self, visitproc visit, void *arg)
{
    Py_VISIT(self->client); Py_VISIT(self->key); Py_VISIT(self->token);
    Py_VISIT(self->ttl_ms); Py_VISIT(self->wait_ms); Py_VISIT(self->flags);
    Py_VISIT(self->local); Py_VISIT(self->reentrant); Py_VISIT(self->outer);
    Py_VISIT(self->hm); Py_VISIT(self->on_lost); Py_VISIT(self->h);
    Py_VISIT(self->retry); Py_VISIT(self->was_lost); Py_VISIT(self->lost_seen);
    Py_VISIT(self->owner_ident); Py_VISIT(self->refused_detail);
    Py_VISIT(self->count);
    return 0;
}

static int dl_lock_clear(dl_py_lock *self)
{
    dl_lock_unlink(self);  /* before count goes */
    Py_CLEAR(self->client); Py_CLEAR(self->key); Py_CLEAR(self->token);
    Py_CLEAR(self->ttl_ms); Py_CLEAR(self->wait_ms); Py_CLEAR(self->flags);
    Py_CLEAR(self->local); Py_CLEAR(self->reentrant); Py_CLEAR(self->outer);
    Py_CLEAR(self->hm); Py_CLEAR(self->on_lost); Py_CLEAR(self->h);
    Py_CLEAR(self->retry); Py_CLEAR(self->was_lost); Py_CLEAR(self->lost_seen);
    Py_CLEAR(self->owner_ident); Py_CLEAR(self->refused_detail);
    Py_CLEAR(self->count);
    return 0;
}

static void dl_lock_dealloc(dl_py_lock *self)
{
    PyObject_GC_UnTrack(self);
    dl_lock_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Lock.__del__: out of the client's Locks; a Lock collected while held
 * goes to _finalize_held (not released: see there). */
static void dl_lock_finalize(PyObject *o)
{
    dl_py_lock *self = (dl_py_lock *)o;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    dl_lock_unlink(self);
    if (self->h != NULL && self->h != Py_None && dl_do0(o, s_finalize_held) < 0)
        PyErr_WriteUnraisable(o);
    PyErr_Restore(t, v, tb);
}

/* Lock._init(client, key, ttl, wait, auto_renew, fencing, reentrant,
 * shared, on_lost, token): Lock.__init__ with its arguments positional. */
static PyObject *dl_lock_init(PyObject *o, PyObject *const *a, Py_ssize_t n)
{
    dl_py_lock *self = (dl_py_lock *)o;
    if (n != 10) {
        PyErr_Format(PyExc_TypeError, "_init() takes 10 arguments (%zd given)", n);
        return NULL;
    }
    PyObject *client = a[0], *key = a[1], *ttl = a[2], *wait = a[3], *on_lost = a[8],
             *token = a[9];
    if (self->local != NULL) {  /* its mutexes may have waiters: never replaced */
        PyErr_SetString(PyExc_TypeError, "a distlock.Lock is initialised once: make a new one");
        return NULL;
    }
    if (!PyObject_TypeCheck(client, (PyTypeObject *)dl_lk.client_cls)) {
        PyErr_SetString(PyExc_TypeError, "client must be a distlock.Client");
        return NULL;
    }
    dl_py_count *count = dl_count_of(client);
    if (count == NULL)
        return NULL;
    Py_XSETREF(self->count, count);
    if (!PyUnicode_Check(key) && !PyBytes_Check(key)) {
        PyObject *r = PyObject_CallFunctionObjArgs(dl_lk.check_key_fn, key, NULL);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    }
    if (token != Py_None && !PyUnicode_Check(token) && !PyBytes_Check(token)) {
        PyObject *what = PyUnicode_FromString("token");
        PyObject *r = what ? PyObject_CallFunctionObjArgs(dl_lk.check_key_fn, token, what, NULL)
                           : NULL;
        Py_XDECREF(what);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    }
    dl_set(&self->token, token);
    dl_set(&self->client, client);
    dl_set(&self->key, key);
    /* _ttl_ms(ttl): its memo for a plain int or float, else the function */
    PyObject *ms = NULL;
    if (dl_is_type(ttl, &PyFloat_Type) || dl_is_type(ttl, &PyLong_Type)) {
        ms = PyDict_GetItemWithError(dl_lk.ttl_memo, ttl);
        Py_XINCREF(ms);
        if (ms == NULL && PyErr_Occurred())
            return NULL;
    }
    if (ms == NULL && (ms = PyObject_CallFunctionObjArgs(dl_lk.ttl_ms_fn, ttl, NULL)) == NULL)
        return NULL;
    Py_XSETREF(self->ttl_ms, ms);
    if (wait == Py_None) {
        dl_set(&self->wait_ms, dl_lk.forever);
    } else {
        PyObject *what = PyUnicode_FromString("wait");
        PyObject *w = what ? PyObject_CallFunctionObjArgs(dl_lk.wait_ms_fn, wait, what, NULL)
                           : NULL;
        Py_XDECREF(what);
        if (w == NULL)
            return NULL;
        Py_XSETREF(self->wait_ms, w);
    }
    static const long bits[4] = { DISTLOCK_AUTO_RENEW, DISTLOCK_FENCING, DISTLOCK_REENTRANT,
                                  DISTLOCK_SHARED };
    long flags = 0;
    int reentrant = 0;
    for (int i = 0; i < 4; i++) {
        int on = PyObject_IsTrue(a[4 + i]);
        if (on < 0)
            return NULL;
        if (on)
            flags |= bits[i];
        if (i == 2)
            reentrant = on;
    }
    PyObject *f = PyLong_FromLong(flags);
    if (f == NULL)
        return NULL;
    Py_XSETREF(self->flags, f);
    PyObject *local = dl_mutex_new(&dl_mutex_type, NULL, NULL);
    if (local == NULL)
        return NULL;
    Py_XSETREF(self->local, local);
    dl_set(&self->reentrant, reentrant ? Py_True : Py_False);
    PyObject *outer = PyList_New(0);
    if (outer == NULL)
        return NULL;
    Py_XSETREF(self->outer, outer);
    PyObject *hm = dl_mutex_new(&dl_mutex_type, NULL, NULL);
    if (hm == NULL)
        return NULL;
    Py_XSETREF(self->hm, hm);
    if (on_lost != Py_None && !PyCallable_Check(on_lost)) {
        PyObject *tn = PyObject_GetAttr((PyObject *)Py_TYPE(on_lost), s_name);
        if (tn != NULL)
            PyErr_Format(PyExc_TypeError, "on_lost must be callable, not %U", tn);
        Py_XDECREF(tn);
        return NULL;
    }
    dl_set(&self->on_lost, on_lost);
    dl_link *head = &self->count->locks, *k = &self->link;
    if (head->next == NULL)
        head->prev = head->next = head;
    k->prev = head->prev, k->next = head;
    head->prev->next = k, head->prev = k;
    Py_RETURN_NONE;
}

/* ClosedError("client is closed", DISTLOCK_ECLOSED), as Client raises it. */
static void dl_raise_closed(void)
{
    PyObject *cls = dl_py_errors[-DISTLOCK_ECLOSED] ? dl_py_errors[-DISTLOCK_ECLOSED]
                                                    : PyExc_RuntimeError;
    PyObject *e = PyObject_CallFunction(cls, "si", "client is closed", DISTLOCK_ECLOSED);
    if (e != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(e), e);
        Py_DECREF(e);
    }
}

static int dl_missing(dl_py_lock *self)
{
    if (self->local && self->hm && self->client && self->count && self->key && self->token &&
        self->ttl_ms &&
        self->wait_ms && self->flags && self->reentrant && self->outer && self->on_lost &&
        Py_TYPE(self->local) == &dl_mutex_type && Py_TYPE(self->hm) == &dl_mutex_type)
        return 0;
    PyErr_SetString(PyExc_TypeError, "distlock: a Lock used before Lock.__init__ ran");
    return -1;
}

/* An acquire that ended after its client was closed (see dl_c_acquire),
 * by a caller still counted in the client's calls: the lock it got, if
 * any, released and freed (*l set to NULL); ClosedError set. */
static void dl_give_back_closed(distlock_lock **l)
{
    if (*l != NULL) {
        distlock_lock *g = *l;
        *l = NULL;
        Py_BEGIN_ALLOW_THREADS
        (void)distlock_release(g);
        distlock_lock_free(g);
        Py_END_ALLOW_THREADS
    }
    dl_raise_closed();
}

/* Lock._c_acquire(wait_ms), the acquire call itself (distlock_acquire_with
 * through the client's call accounting): DISTLOCK_OK with *out,
 * DISTLOCK_NOTACQUIRED, or -1 with an exception. */
static int dl_c_acquire(dl_py_lock *self, long wait_ms, distlock_lock **out)
{
    PyObject *client = self->client;
    dl_py_count *ic = self->count;
    Py_INCREF(client);
    Py_INCREF(ic);
    int closed = dl_enter_count(ic);
    int st = -1;
    PyObject *key = self->key, *token = self->token;
    Py_INCREF(key);
    Py_INCREF(token);
    const char *k = NULL, *tok = NULL;
    distlock_client *cp = ic->cp;  /* close() frees it only once the count is 0 */
    long ttl = PyLong_AsLong(self->ttl_ms), flags = PyLong_AsLong(self->flags);
    if (closed) {
        dl_raise_closed();
        goto out;
    }
    if (PyErr_Occurred())
        goto out;
    if (cp == NULL) {
        PyErr_SetString(PyExc_TypeError, "distlock: the client has no handle");
        goto out;
    }
    if (distlock_py_cstr(key, "key", 0, &k) < 0 || distlock_py_cstr(token, "token", 1, &tok) < 0)
        goto out;
    Py_BEGIN_ALLOW_THREADS
    st = distlock_py_acquire_with(cp, k, ttl, wait_ms, (unsigned)flags, NULL, NULL, tok, out);
    Py_END_ALLOW_THREADS
    /* The client was closed while this call waited: by another thread, or
     * by a signal handler that ran inside this wait (its close() did not
     * wait for this call and cancelled it; the call that leaves last
     * finishes that close, and it may be this one, just below). Nothing
     * is handed out: a lock granted meanwhile is released here, while the
     * count still keeps the client alive, and the caller gets ClosedError
     * (or the handler's own exception), never a lock the close releases
     * behind its back. */
    if (ic->closed && !PyErr_Occurred() && (st == DISTLOCK_OK || st == DISTLOCK_ECANCELED)) {
        dl_give_back_closed(out);
        st = -1;
        goto out;
    }
    if (st < 0) {
        if (!(st == DISTLOCK_ECANCELED && PyErr_Occurred()))  /* else a signal handler's */
            distlock_py_raise(st);
        st = -1;
    }
out:
    Py_DECREF(key);
    Py_DECREF(token);
    dl_leave_count(client, ic);
    Py_DECREF(ic);
    Py_DECREF(client);
    return st;
}

/* A lock granted to a caller who gets an exception instead (no memory for
 * its wrapper, a signal handler raising while it waited for the handle
 * mutex): released, as a call of the client, so that close() does not free
 * the client under it; with an exception set, which it keeps. */
static void dl_give_back(PyObject *client, distlock_lock *l)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    int closed = 0;
    PyObject *inflight = dl_enter(client, &closed);
    if (inflight == NULL)
        PyErr_WriteUnraisable(client);
    Py_BEGIN_ALLOW_THREADS
    if (inflight != NULL && !closed)
        (void)distlock_release(l);
    distlock_lock_free(l);  /* the client closed: the memory only, as _finalize_held */
    Py_END_ALLOW_THREADS
    if (inflight != NULL)
        dl_leave(client, inflight);
    PyErr_Restore(t, v, tb);
}

/* Lock._c_acquire(wait_ms) -> (status, handle or None): what acquire()
 * calls for the subclasses, which have their own (Semaphore, MultiLock). */
static PyObject *dl_lock_c_acquire_py(PyObject *o, PyObject *arg)
{
    if (dl_missing((dl_py_lock *)o) < 0)
        return NULL;
    long wait_ms = PyLong_AsLong(arg);
    if (wait_ms == -1 && PyErr_Occurred())
        return NULL;
    distlock_lock *l = NULL;
    int st = dl_c_acquire((dl_py_lock *)o, wait_ms, &l);
    if (st < 0)
        return NULL;
    PyObject *h = l ? SWIG_NewPointerObj(l, SWIGTYPE_p_distlock_lock, 0)
                    : (Py_INCREF(Py_None), Py_None);
    if (h == NULL) {
        dl_free_handle(l);
        return NULL;
    }
    return Py_BuildValue("(iN)", st, h);
}

/* This thread holds the lock through this object (a reentrant Lock's
 * nested acquire): 1, 0, or -1 with an exception. */
static int dl_owns(dl_py_lock *self)
{
    if (dl_lock_wait(self->hm) < 0)
        return -1;
    int owns = 0;
    if (self->h != NULL && self->h != Py_None && self->retry != NULL &&
        !PyObject_IsTrue(self->retry) && self->owner_ident != NULL &&
        PyLong_Check(self->owner_ident)) {
        unsigned long id = PyLong_AsUnsignedLong(self->owner_ident);
        if (id == (unsigned long)-1 && PyErr_Occurred())
            PyErr_Clear();
        else
            owns = id == PyThread_get_thread_ident();
    }
    if (dl_unlock(self->hm) < 0)
        return -1;
    return owns;
}

static long long dl_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Lock.acquire(blocking=True, timeout=None) */
static PyObject *dl_lock_acquire(PyObject *o, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    static const char *const names[2] = { "blocking", "timeout" };
    static PyObject *ids[2];  /* names interned, made once (the GIL held) */
    dl_py_lock *self = (dl_py_lock *)o;
    PyObject *v[2] = { Py_True, Py_None };
    for (int k = 0; k < 2; k++)
        if (ids[k] == NULL && (ids[k] = PyUnicode_InternFromString(names[k])) == NULL)
            return NULL;
    if (dl_bind_args("acquire()", names, ids, 2, 2, 0, args, nargs, kwnames, v) < 0 ||
        dl_missing(self) < 0)
        return NULL;
    PyObject *blocking = v[0], *timeout = v[1];
    int b = PyObject_IsTrue(blocking);
    if (b < 0)
        return NULL;
    int keep = timeout == Py_None;  /* timeout None or -1: the Lock's own wait */
    if (!keep && (keep = PyObject_RichCompareBool(timeout, dl_lk.minus_one, Py_EQ)) < 0)
        return NULL;
    long wait_ms;
    if (!b) {
        if (!keep) {
            PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
            return NULL;
        }
        wait_ms = 0;
    } else if (keep) {
        wait_ms = PyLong_AsLong(self->wait_ms);
        if (wait_ms == -1 && PyErr_Occurred())
            return NULL;
    } else {
        PyObject *what = PyUnicode_FromString("timeout");
        PyObject *w = what ? PyObject_CallFunctionObjArgs(dl_lk.wait_ms_fn, timeout, what, NULL)
                           : NULL;
        Py_XDECREF(what);
        if (w == NULL)
            return NULL;
        wait_ms = PyLong_AsLong(w);
        Py_DECREF(w);
        if (wait_ms == -1 && PyErr_Occurred())
            return NULL;
    }
    if (self->reentrant == Py_True) {
        int owns = dl_owns(self);
        if (owns < 0)
            return NULL;
        if (owns)  /* the owner's nested acquire */
            return PyObject_CallMethod(o, "_acquire_again", "l", wait_ms);
    }
    dl_py_mutex *local = (dl_py_mutex *)self->local;
    int got;
    if (wait_ms == 0) {
        got = dl_mutex_try(local);
    } else if (wait_ms < 0) {
        got = dl_mutex_wait(local, -1);
    } else {
        long long t0 = dl_now_us();
        got = dl_mutex_wait(local, (long long)wait_ms * 1000);
        long spent = (long)((dl_now_us() - t0) / 1000);
        wait_ms = spent >= wait_ms ? 0 : wait_ms - spent;
    }
    if (got <= 0)
        return got < 0 ? NULL : (Py_INCREF(Py_False), Py_False);
    /* from here on, any error frees the local mutex again */
    PyObject *on_lost = self->on_lost, *h = NULL;
    int st = -1;
    if (on_lost != Py_None) {  /* the fd must exist before a loss */
        PyObject *w = PyObject_CallMethod(self->client, "_lost_watcher", NULL);
        if (w == NULL)
            goto fail;
        Py_DECREF(w);
    }
    if (Py_TYPE(o) == (PyTypeObject *)dl_lk.lock_cls) {
        distlock_lock *l = NULL;
        st = dl_c_acquire(self, wait_ms, &l);
        if (st == DISTLOCK_OK) {
            h = SWIG_NewPointerObj(l, SWIGTYPE_p_distlock_lock, 0);
            if (h == NULL) {  /* the caller sees an exception: it must not hold the lock */
                dl_give_back(self->client, l);
                goto fail;
            }
        } else if (l != NULL) {
            dl_free_handle(l);
        }
    } else {  /* a subclass's own acquire (Semaphore, MultiLock) */
        /* Counted as a call around _c_acquire's own (Client._call), so that
         * a close made meanwhile is finished only after the check below,
         * which hands out nothing then (as dl_c_acquire). */
        dl_py_count *ic = self->count;
        PyObject *client = self->client;
        Py_INCREF(ic);
        Py_INCREF(client);
        PyObject *r = NULL;
        if (dl_enter_count(ic))
            dl_raise_closed();
        else
            r = PyObject_CallMethod(o, "_c_acquire", "l", wait_ms);
        if (r != NULL && (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2)) {
            Py_CLEAR(r);
            PyErr_SetString(PyExc_TypeError, "distlock: _c_acquire() must return (status, handle)");
        }
        if (r != NULL) {
            st = (int)PyLong_AsLong(PyTuple_GET_ITEM(r, 0));
            h = PyTuple_GET_ITEM(r, 1);
            Py_INCREF(h);
            Py_DECREF(r);
            if (st == -1 && PyErr_Occurred())
                Py_CLEAR(h);
        }
        PyObject *cancelled = dl_py_errors[-DISTLOCK_ECANCELED];
        if (ic->closed && h != NULL && st == DISTLOCK_OK) {
            distlock_lock *l = NULL;
            if (dl_handle(h, &l) == 0)
                dl_give_back_closed(&l);
            Py_CLEAR(h);
        } else if (ic->closed && h == NULL && cancelled != NULL &&
                   PyErr_ExceptionMatches(cancelled)) {
            PyErr_Clear();  /* the close's cancel, not the caller's */
            dl_raise_closed();
        }
        dl_leave_count(client, ic);
        Py_DECREF(ic);
        Py_DECREF(client);
        if (h == NULL)
            goto fail;
    }
    if (st < 0)
        goto fail;
    if (st != DISTLOCK_OK) {  /* read in this thread, before any other call */
        Py_XDECREF(h);
        const char *e = distlock_last_error();
        PyObject *d = PyUnicode_DecodeUTF8(e, (Py_ssize_t)strlen(e), "surrogateescape");
        if (d == NULL)
            goto fail;
        Py_XSETREF(self->refused_detail, d);
        if (dl_mutex_release_c(local) < 0)
            return NULL;
        Py_RETURN_FALSE;
    }
    if (dl_lock_wait(self->hm) < 0) {
        distlock_lock *l = NULL;
        if (dl_handle(h, &l) == 0)  /* not held by a caller who sees an exception */
            dl_give_back(self->client, l);
        Py_DECREF(h);
        dl_unlock_keep(self->local);
        return NULL;
    }
    PyObject *old = self->h;
    self->h = h;  /* the reference taken above */
    dl_set(&self->retry, Py_False);
    if (old != NULL && old != Py_None) {  /* a failed release never retried: freeing it tries once more */
        distlock_lock *ol = NULL;
        if (dl_handle(old, &ol) == 0)
            dl_free_handle(ol);
        else
            PyErr_WriteUnraisable(o);
    }
    Py_XDECREF(old);
    dl_set(&self->was_lost, Py_False);
    dl_set(&self->lost_seen, Py_False);
    PyObject *ident = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    if (ident != NULL)
        Py_XSETREF(self->owner_ident, ident);
    if (dl_unlock(self->hm) < 0 || ident == NULL)
        return NULL;  /* not reached in practice: the lock is held, its state set */
    if (on_lost != Py_None) {
        PyObject *w = PyObject_CallMethod(self->client, "_lost_watcher", NULL);
        PyObject *r = w ? PyObject_CallMethod(w, "watch", "O", o) : NULL;
        Py_XDECREF(w);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    }
    Py_RETURN_TRUE;
fail:
    dl_unlock_keep(self->local);
    return NULL;
}

/* Lock.release() */
static PyObject *dl_lock_release(PyObject *o, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    dl_py_lock *self = (dl_py_lock *)o;
    (void)args;
    if (kwnames != NULL) {
        PyErr_Format(PyExc_TypeError, "release() got an unexpected keyword argument '%S'",
                     PyTuple_GET_ITEM(kwnames, 0));
        return NULL;
    }
    if (nargs != 0) {
        PyErr_Format(PyExc_TypeError,
                     "release() takes 1 positional argument but %zd were given", nargs + 1);
        return NULL;
    }
    if (dl_missing(self) < 0 || dl_lock_wait(self->hm) < 0)
        return NULL;
    PyObject *h = self->h, *client = self->client;
    if (h == NULL || h == Py_None ||
        (self->reentrant == Py_True && !(self->owner_ident != NULL && PyLong_Check(self->owner_ident)
                                         && PyLong_AsUnsignedLong(self->owner_ident)
                                                == PyThread_get_thread_ident()))) {
        PyErr_Clear();  /* (an owner ident out of range: not this thread) */
        /* not held, or a reentrant lock's release from another thread */
        PyObject *r = PyObject_CallMethod(o, "_release_refused", NULL);  /* raises */
        Py_XDECREF(r);
        dl_unlock_keep(self->hm);
        return NULL;
    }
    Py_INCREF(h);
    Py_INCREF(client);
    int inner = PyList_Check(self->outer) && PyList_GET_SIZE(self->outer) > 0;
    int retry = inner ? 0 : PyObject_IsTrue(self->retry);
    int closed = 0, rc = INT_MIN;  /* INT_MIN: an exception is set */
    int freed = 0;
    distlock_lock *l = NULL;
    PyObject *inflight = NULL;
    if (retry >= 0) {
        inflight = (PyObject *)self->count;
        Py_INCREF(inflight);
        closed = dl_enter_count(self->count);
    }
    if (inflight != NULL) {
        if (closed) {
            dl_raise_closed();
        } else if (dl_handle(h, &l) == 0) {
            /* a retry goes through the same handle: the core sends the
             * release again when the last one got no verdict. The last
             * release's handle is freed in the same stretch without the
             * GIL (self->hm is held: nothing reads self->h meanwhile). */
            Py_BEGIN_ALLOW_THREADS
            rc = distlock_release(l);
            if (rc == DISTLOCK_OK && !inner)
                rc = distlock_lock_lost(l);
            if (rc >= 0 && !inner) {
                distlock_lock_free(l);
                freed = 1;
            }
            Py_END_ALLOW_THREADS
        }
        dl_leave(client, inflight);
    }
    Py_DECREF(client);
    PyObject *lost = NULL;
    if (rc < 0) {
        PyObject *exc = rc == INT_MIN ? NULL : distlock_py_error(rc, distlock_last_error());
        int is_lost = exc && !inner ? PyObject_IsInstance(exc, dl_lk.lock_lost_cls) : 0;
        if (is_lost <= 0) {
            /* no verdict: the handle is kept for release() to try again,
             * and the local mutex is free again */
            if (exc != NULL && is_lost == 0)
                PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_XDECREF(exc);
            Py_DECREF(h);
            if (!inner && retry == 0) {
                dl_set(&self->retry, Py_True);
                dl_unlock_keep(self->local);
            }
            dl_unlock_keep(self->hm);
            return NULL;
        }
        lost = exc;
    }
    if (inner) {  /* an inner acquisition: the core only counted it down */
        PyObject *outer_h = PyObject_CallMethod(self->outer, "pop", NULL);
        if (outer_h == NULL) {
            Py_DECREF(h);
            dl_unlock_keep(self->hm);
            return NULL;
        }
        Py_XSETREF(self->h, outer_h);
    } else {
        dl_set(&self->h, Py_None);
        dl_set(&self->retry, Py_False);
        dl_set(&self->owner_ident, Py_None);
        dl_set(&self->was_lost, (lost != NULL || rc > 0) ? Py_True : Py_False);
    }
    if (!freed)
        dl_free_handle(l);  /* already released: no network */
    Py_DECREF(h);
    int err = 0;
    if (!inner && !retry && (err = dl_mutex_release_c((dl_py_mutex *)self->local)) < 0)
        dl_unlock_keep(self->hm);
    else
        err = dl_unlock(self->hm);
    if (err < 0) {
        Py_XDECREF(lost);
        return NULL;
    }
    if (lost != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(lost), lost);
        Py_DECREF(lost);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Lock.__enter__: acquire() as the Lock's wait says; LockNotAcquired if not. */
static PyObject *dl_lock_enter(PyObject *o, PyObject *unused)
{
    (void)unused;
    PyObject *r = dl_call0(o, s_acquire);  /* self.acquire(): an instance's own too */
    if (r == NULL)
        return NULL;
    int got = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (got < 0)
        return NULL;
    if (!got) {
        r = dl_call0(o, s_not_acquired);  /* raises */
        Py_XDECREF(r);
        if (r != NULL)
            PyErr_SetString(PyExc_RuntimeError, "distlock: _not_acquired() returned");
        return NULL;
    }
    Py_INCREF(o);
    return o;
}

/* Lock.__exit__: release(), whatever the block raised. */
static PyObject *dl_lock_exit(PyObject *o, PyObject *const *args, Py_ssize_t n)
{
    (void)args;
    (void)n;
    return dl_call0(o, s_release);  /* self.release(): an instance's own too */
}

/* What _init sets is read-only after it: the C code waits on the mutexes
 * and calls through the client without a reference of its own. */
#define DL_MEMBER(name, field) { name, T_OBJECT, offsetof(dl_py_lock, field), 0, NULL }
#define DL_SET_ONCE(name, field) { name, T_OBJECT, offsetof(dl_py_lock, field), READONLY, NULL }
static PyMemberDef dl_lock_members[] = {
    DL_SET_ONCE("_client", client), DL_SET_ONCE("_key", key), DL_SET_ONCE("_token", token),
    DL_SET_ONCE("_ttl_ms", ttl_ms), DL_SET_ONCE("_wait_ms", wait_ms),
    DL_SET_ONCE("_flags", flags), DL_SET_ONCE("_local", local),
    DL_SET_ONCE("_reentrant", reentrant), DL_MEMBER("_outer", outer), DL_SET_ONCE("_hm", hm),
    DL_SET_ONCE("_on_lost", on_lost),
    DL_MEMBER("_h", h), DL_MEMBER("_retry", retry), DL_MEMBER("_was_lost", was_lost),
    DL_MEMBER("_lost_seen", lost_seen), DL_MEMBER("_owner_ident", owner_ident),
    DL_MEMBER("_refused_detail", refused_detail),
    { NULL, 0, 0, 0, NULL }
};

static PyMethodDef dl_lock_methods[] = {
    { "_init", (PyCFunction)(void (*)(void))dl_lock_init, METH_FASTCALL,
      "Lock.__init__ with its arguments positional (Client.lock() calls it)." },
    { "_c_acquire", dl_lock_c_acquire_py, METH_O,
      "_c_acquire(wait_ms) -> (status, handle or None): the acquire call itself." },
    { "acquire", (PyCFunction)(void (*)(void))dl_lock_acquire, METH_FASTCALL | METH_KEYWORDS,
      "acquire($self, /, blocking=True, timeout=None)\n--\n\n"
      "Take the lock. Returns True when acquired, False when another\n"
      "owner still holds it once the wait is over (``blocking=False``: try\n"
      "once; ``timeout``: seconds, overrides the lock's ``wait``; -1 or None\n"
      "keeps it). Raises on errors (ConnectionError, NoQuorum...).\n"
      "Ctrl-C while waiting (in the main thread) raises KeyboardInterrupt\n"
      "at once, with nothing held (as does any signal handler that raises)." },
    { "release", (PyCFunction)(void (*)(void))dl_lock_release, METH_FASTCALL | METH_KEYWORDS,
      "release($self, /)\n--\n\n"
      "Release (compare-and-delete). Raises LockLost if the lock had\n"
      "expired or was taken meanwhile (another owner's key is untouched),\n"
      "NotHeld if this object does not hold it. Any other error (no\n"
      "quorum, a node refusing, timeouts) leaves the lock to this object:\n"
      "call release() again once the servers answer (the token stays\n"
      "readable meanwhile); an acquire() in between gives it up to its TTL." },
    { "__enter__", dl_lock_enter, METH_NOARGS,
      "__enter__($self, /)\n--\n\n"
      "Acquire (waiting as the Lock's ``wait`` says); the Lock itself.\n\n"
      "Raises LockNotAcquired when another owner still holds it after the\n"
      "wait, and the errors of :meth:`acquire`." },
    { "__exit__", (PyCFunction)(void (*)(void))dl_lock_exit, METH_FASTCALL,
      "__exit__($self, /, *exc)\n--\n\n"
      "Release the lock (:meth:`release`), whatever the block raised." },
    { NULL, NULL, 0, NULL }
};

static PyTypeObject dl_lock_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "distlock._core.LockBase",
    .tp_basicsize = sizeof(dl_py_lock),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "distlock.Lock's state and its common path (see distlock/_client.py).",
    .tp_new = dl_lock_new,
    .tp_dealloc = (destructor)dl_lock_dealloc,
    .tp_traverse = (traverseproc)dl_lock_traverse,
    .tp_clear = (inquiry)dl_lock_clear,
    .tp_finalize = dl_lock_finalize,
    .tp_members = dl_lock_members,
    .tp_methods = dl_lock_methods,
};

static int dl_install_client_lock(PyObject *client_cls);

/* lock_setup(Client, Lock, ttl_memo, _ttl_ms, _wait_ms, _check_key,
 * LockLost): once, by distlock/_client.py; Client.lock becomes the C
 * method below (dl_client_lock). */
static PyObject *dl_lock_setup(PyObject *mod, PyObject *const *a, Py_ssize_t n)
{
    (void)mod;
    if (n != 7 || !PyType_Check(a[0]) || !PyType_Check(a[1]) || !PyDict_Check(a[2]) ||
        !PyType_IsSubtype((PyTypeObject *)a[1], &dl_lock_type)) {
        PyErr_SetString(PyExc_TypeError, "lock_setup(Client, Lock, dict, _ttl_ms, _wait_ms, "
                                         "_check_key, LockLost)");
        return NULL;
    }
    PyObject **slots[7] = { &dl_lk.client_cls, &dl_lk.lock_cls, &dl_lk.ttl_memo,
                            &dl_lk.ttl_ms_fn, &dl_lk.wait_ms_fn, &dl_lk.check_key_fn,
                            &dl_lk.lock_lost_cls };
    for (int i = 0; i < 7; i++)
        dl_set(slots[i], a[i]);
    if (dl_install_client_lock(a[0]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* cls.__new__(cls) and its _init(a[0..9]): a new Lock. */
static PyObject *dl_make_lock(PyTypeObject *cls, PyObject *const *a)
{
    PyObject *empty = PyTuple_New(0);
    if (empty == NULL)
        return NULL;
    PyObject *o = cls->tp_new(cls, empty, NULL);
    Py_DECREF(empty);
    if (o == NULL)
        return NULL;
    PyObject *r = dl_lock_init(o, a, 10);
    if (r == NULL) {
        Py_DECREF(o);
        return NULL;
    }
    Py_DECREF(r);
    return o;
}

/* new_lock(cls, client, key, ttl, wait, auto_renew, fencing, reentrant,
 * shared, on_lost, token): cls.__new__(cls) and its _init, one call. */
static PyObject *dl_new_lock(PyObject *mod, PyObject *const *a, Py_ssize_t n)
{
    (void)mod;
    if (n != 11 || !PyType_Check(a[0]) || dl_lk.lock_cls == NULL ||
        !PyType_IsSubtype((PyTypeObject *)a[0], (PyTypeObject *)dl_lk.lock_cls)) {
        PyErr_SetString(PyExc_TypeError, "new_lock(Lock class, 10 arguments of Lock._init)");
        return NULL;
    }
    return dl_make_lock((PyTypeObject *)a[0], a + 1);
}

/* Client.lock: the Python method of that name in distlock/_client.py,
 * made a method descriptor of Client by lock_setup, so that a call builds
 * the Lock without a Python frame and the keyword defaults it reads from a
 * dict. The def stays the one statement of the method: its parameters
 * (self, then Lock._init's nine, in _init's order), their defaults and
 * its docstring are read from it here, and the arguments are bound as it
 * binds them; the checks are Lock._init's. */
#define DL_LOCK_NARGS 9
static struct {
    PyObject *names[DL_LOCK_NARGS];     /* the def's parameter names (kept for text) */
    const char *text[DL_LOCK_NARGS];
    PyObject *defaults[DL_LOCK_NARGS];  /* NULL: required */
    int npos, nreq;
} dl_cl;

static PyObject *dl_client_lock(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    PyObject *a[DL_LOCK_NARGS + 1];
    a[0] = self;
    memcpy(a + 1, dl_cl.defaults, sizeof dl_cl.defaults);
    if (dl_bind_args("lock()", dl_cl.text, dl_cl.names, DL_LOCK_NARGS, dl_cl.npos, dl_cl.nreq,
                     args, nargs, kwnames, a + 1) < 0)
        return NULL;
    return dl_make_lock((PyTypeObject *)dl_lk.lock_cls, a);
}

static PyMethodDef dl_client_lock_def = {
    "lock", (PyCFunction)(void (*)(void))dl_client_lock, METH_FASTCALL | METH_KEYWORDS, NULL
};

/* The def's parameters into dl_cl, and its text signature
 * ("lock($self, key, ttl=30.0, *, wait=None, ...)") followed by its
 * docstring into the descriptor's doc (kept for the life of the process,
 * as a type's are). 0, or -1 with an exception. */
static int dl_client_lock_from_def(PyObject *f)
{
    PyObject *code = PyObject_GetAttrString(f, "__code__");
    PyObject *defs = PyObject_GetAttrString(f, "__defaults__");
    PyObject *kwdefs = PyObject_GetAttrString(f, "__kwdefaults__");
    PyObject *doc = PyObject_GetAttrString(f, "__doc__");
    PyObject *varnames = code ? PyObject_GetAttrString(code, "co_varnames") : NULL;
    PyObject *nposo = code ? PyObject_GetAttrString(code, "co_argcount") : NULL;
    PyObject *nkwo = code ? PyObject_GetAttrString(code, "co_kwonlyargcount") : NULL;
    PyObject *parts = PyList_New(0), *sig = NULL;
    int rc = -1;
    if (!defs || !kwdefs || !doc || !varnames || !nposo || !nkwo || !parts)
        goto out;
    long npos = PyLong_AsLong(nposo) - 1, nkw = PyLong_AsLong(nkwo);  /* without self */
    Py_ssize_t ndef = PyTuple_Check(defs) ? PyTuple_GET_SIZE(defs) : 0;
    if (npos + nkw != DL_LOCK_NARGS || !PyTuple_Check(varnames) ||
        PyTuple_GET_SIZE(varnames) < DL_LOCK_NARGS + 1 || ndef > npos ||
        (kwdefs != Py_None && !PyDict_Check(kwdefs))) {
        PyErr_SetString(PyExc_TypeError, "lock_setup: Client.lock must take self and "
                                         "Lock._init's nine arguments");
        goto out;
    }
    dl_cl.npos = (int)npos;
    dl_cl.nreq = (int)(npos - ndef);
    for (int k = 0; k < DL_LOCK_NARGS; k++) {
        PyObject *name = PyTuple_GET_ITEM(varnames, k + 1), *d = NULL, *part;
        if (k >= dl_cl.nreq && k < npos)
            d = PyTuple_GET_ITEM(defs, k - dl_cl.nreq);
        else if (k >= npos && kwdefs != Py_None)
            d = PyDict_GetItemWithError(kwdefs, name);
        if (k >= npos && d == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "lock_setup: Client.lock's keyword-only "
                                                 "arguments need defaults");
            goto out;
        }
        dl_set(&dl_cl.names[k], name);
        if ((dl_cl.text[k] = PyUnicode_AsUTF8(name)) == NULL)
            goto out;
        Py_XINCREF(d);
        Py_XSETREF(dl_cl.defaults[k], d);
        part = d ? PyUnicode_FromFormat("%s%U=%R", k == npos ? "*, " : "", name, d)
                 : PyUnicode_FromFormat("%U", name);
        if (part == NULL || PyList_Append(parts, part) < 0) {
            Py_XDECREF(part);
            goto out;
        }
        Py_DECREF(part);
    }
    if (dl_client_lock_def.ml_doc == NULL) {
        PyObject *sep = PyUnicode_FromString(", ");
        PyObject *list = sep ? PyUnicode_Join(sep, parts) : NULL;
        Py_XDECREF(sep);
        if (!PyUnicode_Check(doc))  /* (python -OO: no docstrings) */
            Py_XSETREF(doc, PyUnicode_FromString(""));
        sig = list && doc ? PyUnicode_FromFormat("lock($self, %U)\n--\n\n%U", list, doc)
                          : NULL;
        Py_XDECREF(list);
        Py_ssize_t n = 0;
        const char *t = sig ? PyUnicode_AsUTF8AndSize(sig, &n) : NULL;
        char *text = t ? PyMem_RawMalloc((size_t)n + 1) : NULL;
        if (text == NULL) {
            if (t != NULL)
                PyErr_NoMemory();
            goto out;
        }
        memcpy(text, t, (size_t)n + 1);
        dl_client_lock_def.ml_doc = text;
    }
    rc = 0;
out:
    Py_XDECREF(code); Py_XDECREF(defs); Py_XDECREF(kwdefs); Py_XDECREF(doc);
    Py_XDECREF(varnames); Py_XDECREF(nposo); Py_XDECREF(nkwo); Py_XDECREF(parts);
    Py_XDECREF(sig);
    return rc;
}

static int dl_install_client_lock(PyObject *client_cls)
{
    PyObject *f = PyObject_GetAttrString(client_cls, "lock");
    int rc = f ? dl_client_lock_from_def(f) : -1;
    Py_XDECREF(f);
    if (rc < 0)
        return -1;
    PyObject *descr = PyDescr_NewMethod((PyTypeObject *)client_cls, &dl_client_lock_def);
    if (descr == NULL)
        return -1;
    rc = PyObject_SetAttrString(client_cls, "lock", descr);
    Py_DECREF(descr);
    return rc;
}

static PyMethodDef dl_lock_module_methods[] = {
    { "lock_setup", (PyCFunction)(void (*)(void))dl_lock_setup, METH_FASTCALL, NULL },
    { "new_lock", (PyCFunction)(void (*)(void))dl_new_lock, METH_FASTCALL, NULL },
    { NULL, NULL, 0, NULL }
};

static int dl_lock_module_init(PyObject *m)
{
    struct { PyObject **s; const char *text; } names[] = {
        { &s_acquire, "acquire" }, { &s_release, "release" },
        { &s_inflight, "_inflight" }, { &s_finalize_held, "_finalize_held" },
        { &s_wake_closer, "_wake_closer" }, { &s_not_acquired, "_not_acquired" },
        { &s_name, "__name__" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].s = PyUnicode_InternFromString(names[i].text)) == NULL)
            return -1;
    if ((dl_lk.minus_one = PyLong_FromLong(-1)) == NULL ||
        (dl_lk.forever = PyLong_FromLong(DISTLOCK_WAIT_FOREVER)) == NULL)
        return -1;
    if (PyType_Ready(&dl_lock_type) < 0 || PyType_Ready(&dl_mutex_type) < 0 ||
        PyType_Ready(&dl_count_type) < 0)
        return -1;
    Py_INCREF(&dl_mutex_type);
    if (PyModule_AddObject(m, "Mutex", (PyObject *)&dl_mutex_type) < 0) {
        Py_DECREF(&dl_mutex_type);
        return -1;
    }
    Py_INCREF(&dl_count_type);
    if (PyModule_AddObject(m, "CallCount", (PyObject *)&dl_count_type) < 0) {
        Py_DECREF(&dl_count_type);
        return -1;
    }
    Py_INCREF(&dl_lock_type);
    if (PyModule_AddObject(m, "LockBase", (PyObject *)&dl_lock_type) < 0) {
        Py_DECREF(&dl_lock_type);
        return -1;
    }
    return PyModule_AddFunctions(m, dl_lock_module_methods);
}
%}

%init %{
    if (dl_lock_module_init(m) < 0)
        return NULL;
%}

%pythoncode %{
LockBase = __core.LockBase
Mutex = __core.Mutex
CallCount = __core.CallCount
lock_setup = __core.lock_setup
new_lock = __core.new_lock
%}

%include "distlock.h"
