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
              int distlock_admin_force_release, int distlock_release, int distlock_release_token {
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
%ignore distlock_client_cancel;
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

%include "distlock.h"
