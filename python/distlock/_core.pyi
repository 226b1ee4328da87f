# Type stubs for the SWIG-generated module distlock._core (bindings/distlock.i).
# Handles are opaque SWIG pointer objects. Every call that returns a status
# raises the distlock exception registered for a negative status; the ones
# below that return an int status can only return DISTLOCK_OK or
# DISTLOCK_NOTACQUIRED (inspect: 1 held / 0 free).
from typing import List, Mapping, Optional, Sequence, Tuple, Type

class _ClientHandle: ...  # SwigPyObject wrapping distlock_client *
class _LockHandle: ...    # SwigPyObject wrapping distlock_lock *

_Str = str | bytes

DISTLOCK_VERSION_MAJOR: int
DISTLOCK_VERSION_MINOR: int
DISTLOCK_VERSION_PATCH: int
DISTLOCK_VERSION_NUMBER: int
DISTLOCK_VERSION_STRING: str

DISTLOCK_OK: int
DISTLOCK_NOTACQUIRED: int
DISTLOCK_EINVAL: int
DISTLOCK_ENOMEM: int
DISTLOCK_ECONN: int
DISTLOCK_ETIMEDOUT: int
DISTLOCK_ENOQUORUM: int
DISTLOCK_ENOTOWNER: int
DISTLOCK_EPROTO: int
DISTLOCK_ECLOSED: int
DISTLOCK_ECANCELED: int
DISTLOCK_ESYS: int
DISTLOCK_STATUS_MIN: int

DISTLOCK_OPT_CONNECT_TIMEOUT_MS: int
DISTLOCK_OPT_STATS: int
DISTLOCK_OPT_OWNER_INFO: int
DISTLOCK_OPT_OWNER_LABEL: int
DISTLOCK_OWNER_LABEL_MAX: int
DISTLOCK_STAT_NAME_MAX: int
DISTLOCK_OPT_COMMAND_TIMEOUT_MS: int
DISTLOCK_OPT_DRIFT_PPM: int
DISTLOCK_OPT_DRIFT_MIN_MS: int
DISTLOCK_OPT_RETRY_MIN_MS: int
DISTLOCK_OPT_RETRY_MAX_MS: int
# WAIT for replicas
DISTLOCK_OPT_WAIT_REPLICAS: int
DISTLOCK_OPT_WAIT_TIMEOUT_MS: int
DISTLOCK_OPT_USERNAME: int
DISTLOCK_OPT_PASSWORD: int
# TLS
DISTLOCK_OPT_TLS_VERIFY: int
DISTLOCK_OPT_TLS_CA_FILE: int
DISTLOCK_OPT_TLS_CA_DIR: int
DISTLOCK_OPT_TLS_CERT: int
DISTLOCK_OPT_TLS_KEY: int
DISTLOCK_OPT_TLS_SERVER_NAME: int
DISTLOCK_OPT_STRING_FIRST: int
DISTLOCK_OPTION_LONG: int
DISTLOCK_OPTION_STRING: int
# the option table: (name, id, type, min, max, default, summary)
_OptionRow = Tuple[str, int, int, int, int, int, str]
def distlock_py_option(name: str) -> _OptionRow: ...
def distlock_py_options() -> List[_OptionRow]: ...

DISTLOCK_KEY_MAX: int
DISTLOCK_TOKEN_MAX: int
DISTLOCK_TTL_MAX: int
DISTLOCK_WAIT_FOREVER: int
DISTLOCK_FENCING: int
DISTLOCK_AUTO_RENEW: int
DISTLOCK_REENTRANT: int
DISTLOCK_FAIR: int
DISTLOCK_STRICT: int
DISTLOCK_SHARED: int
DISTLOCK_PERMITS_MAX: int
DISTLOCK_KEYS_MAX: int
DISTLOCK_HOLDER_FREE: int
DISTLOCK_HOLDER_LOCK: int
DISTLOCK_HOLDER_READERS: int
DISTLOCK_HOLDER_SEMAPHORE: int
DISTLOCK_HOLDER_OTHER: int

def distlock_py_set_errors(base: Type[BaseException],
                           by_status: Mapping[int, Type[BaseException]]) -> None: ...

# Install the interrupt hook that runs Python signal handlers while a waiting
# acquire blocks in the main thread (KeyboardInterrupt cancels the wait).
def distlock_py_catch_signals(c: _ClientHandle, main_ident: int) -> None: ...

def distlock_version_number() -> int: ...
def distlock_version_string() -> str: ...
def distlock_strerror(status: int) -> str: ...
def distlock_last_error() -> str: ...

def distlock_client_new(servers: _Str) -> _ClientHandle: ...
def distlock_client_free(c: Optional[_ClientHandle]) -> None: ...
def distlock_client_abandon(c: Optional[_ClientHandle]) -> None: ...
def distlock_client_set(c: _ClientHandle, opt: int, value: int) -> None: ...
def distlock_client_set_str(c: _ClientHandle, opt: int, value: Optional[_Str]) -> None: ...
def distlock_client_node_count(c: _ClientHandle) -> int: ...
def distlock_client_quorum(c: _ClientHandle) -> int: ...
def distlock_py_stats(c: _ClientHandle) -> dict[str, int]: ...
def distlock_client_node_uri(c: _ClientHandle, i: int) -> Optional[str]: ...

# (status, lock): lock is None when status is DISTLOCK_NOTACQUIRED.
def distlock_acquire(c: _ClientHandle, key: _Str, ttl_ms: int, wait_ms: int,
                     flags: int) -> Tuple[int, Optional[_LockHandle]]: ...
def distlock_release(lock: _LockHandle) -> None: ...
# distlock_release, then the handle's lost flag (distlock_lock_lost)
def distlock_py_release(lock: _LockHandle) -> bool: ...
def distlock_lock_free(lock: Optional[_LockHandle]) -> None: ...
def distlock_lock_abandon(lock: Optional[_LockHandle]) -> None: ...
def distlock_extend(lock: _LockHandle, ttl_ms: int) -> None: ...
def distlock_lock_validity_ms(lock: _LockHandle) -> int: ...
def distlock_lock_key(lock: _LockHandle) -> str: ...
def distlock_lock_token(lock: _LockHandle) -> str: ...
def distlock_lock_fence(lock: _LockHandle) -> int: ...
def distlock_lock_lost(lock: _LockHandle) -> int: ...

# (status, validity_ms)
def distlock_acquire_token(c: _ClientHandle, key: _Str, ttl_ms: int, token: _Str,
                           flags: int) -> Tuple[int, int]: ...
def distlock_release_token(c: _ClientHandle, key: _Str, token: _Str) -> None: ...
# validity_ms
def distlock_extend_token(c: _ClientHandle, key: _Str, token: _Str, ttl_ms: int) -> int: ...
def distlock_token_generate() -> str: ...

# (held 0/1, token, nodes, pttl_ms, answered, taken, kind DISTLOCK_HOLDER_*, holders);
# node -1: every node's verdict
def distlock_admin_holder(c: _ClientHandle, key: _Str,
                          node: int) -> Tuple[int, str, int, int, int, int, int, int]: ...
# the name of a kind ("free", "lock", "readers", "semaphore", "other"), as every
# front end shows it; no I/O
def distlock_holder_kind_name(kind: int) -> str: ...
# ttl_ms (the one TTL rule)
def distlock_ttl_from_seconds(seconds: float) -> int: ...
# number of nodes it was deleted on
def distlock_admin_force_release(c: _ClientHandle, key: _Str) -> int: ...

# -- lost leases and asyncio --
class _CancelHandle: ...  # SwigPyObject wrapping distlock_cancel *

# The client's lost eventfd (created on first call; readable when one of its
# locks is found lost; read 8 bytes to reset).
def distlock_client_lost_fd(c: _ClientHandle) -> int: ...
def distlock_cancel_new() -> _CancelHandle: ...
def distlock_cancel_fire(cancel: _CancelHandle) -> None: ...
def distlock_cancel_free(cancel: Optional[_CancelHandle]) -> None: ...
# distlock_acquire_with: (status, lock): status DISTLOCK_OK, DISTLOCK_NOTACQUIRED or
# DISTLOCK_ECANCELED (the cancel given fired; without a cancel, ECANCELED raises);
# lock_token: args->token (None: a fresh token)
def distlock_py_acquire_with(c: _ClientHandle, key: _Str, ttl_ms: int, wait_ms: int,
                             flags: int, owner: Optional[_Str], cancel: Optional[_CancelHandle],
                             lock_token: Optional[_Str]
                             ) -> Tuple[int, Optional[_LockHandle]]: ...
# a handle of `token` holding `key`, taken elsewhere (no I/O)
def distlock_lock_restore(c: _ClientHandle, key: _Str, token: _Str) -> _LockHandle: ...
def distlock_py_async_raise(ident: int, exc: Optional[Type[BaseException]]) -> int: ...

# distlock_semaphore_acquire / distlock_acquire_many: (status, lock): status
# DISTLOCK_OK or DISTLOCK_NOTACQUIRED, or DISTLOCK_ECANCELED when the cancel
# given fired (without a cancel, ECANCELED raises like any error).
def distlock_py_semaphore_acquire(c: _ClientHandle, key: _Str, permits: int, ttl_ms: int,
                                  wait_ms: int, flags: int, cancel: Optional[_CancelHandle]
                                  ) -> Tuple[int, Optional[_LockHandle]]: ...
def distlock_py_acquire_many(c: _ClientHandle, keys: Sequence[_Str], ttl_ms: int, wait_ms: int,
                             flags: int, cancel: Optional[_CancelHandle]
                             ) -> Tuple[int, Optional[_LockHandle]]: ...
def distlock_lock_key_count(lock: _LockHandle) -> int: ...
def distlock_lock_key_at(lock: _LockHandle, i: int) -> Optional[str]: ...
def distlock_lock_fence_at(lock: _LockHandle, i: int) -> int: ...
