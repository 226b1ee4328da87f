<?php

/**
 * @generate-class-entries
 * @undocumentable
 */

namespace {
    /**
     * Drop-in for the ERP userland Process_RequestCounter::distributedLock():
     * same defaults, same results. Takes the lock once (no waiting) on the servers
     * of distlock.servers; blocks for one round trip (the INI timeouts).
     * @param string $key the lock's key (1..1024 bytes)
     * @param int|float $ttl seconds the lock lives; a float is rounded up to whole ms by
     *        the one TTL rule, as everywhere (no deprecation notice)
     * @param string|int|null $random the token to hold it with (null: a fresh random one)
     * @param string $tipMsg the message of the \Exception thrown when the key is held
     * @return string|int the token holding the lock
     * @throws \Exception code 500002 (Distlock\Exception::HELD): the key is held by another token
     * @throws Distlock\AcquireException the servers gave no usable answer; nothing is held
     * @throws Distlock\Exception out of memory, a system resource refused, not usable in this process
     * @throws \ValueError an invalid key or ttl
     */
    function distributedLock(string $key = '', int|float $ttl = 60, string|int|null $random = null, string $tipMsg = ''): string|int {}

    /**
     * Releases $key if $random holds it (compare-and-delete); blocks for one round trip.
     * @param string $key the lock's key
     * @param string|int $random the token distributedLock() returned
     * @return true|int true when this token held the key and it is now released, int 1 otherwise
     * @throws Distlock\ConnectionException the servers gave no usable answer
     * @throws Distlock\Exception out of memory, not usable in this process
     * @throws \ValueError an invalid key or token
     */
    function distributedUnlock(string $key = '', string|int $random = 0): true|int {}
}

namespace Distlock {
    /**
     * Base of every exception the extension throws (besides the compat \Exception 500002).
     * Its constants are the codes; which status throws which class with which code is
     * the table in docs/errors.md ("Statuses in each front end").
     */
    class Exception extends \RuntimeException
    {
        /**
         * Held by another owner: distributedLock()'s \Exception, LockTimeoutException.
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_HELD
         */
        public const HELD = UNKNOWN;
        /**
         * An invalid argument or configuration (ConfigurationException, or a \ValueError's cause).
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_INVALID
         */
        public const INVALID = UNKNOWN;
        /**
         * Out of memory (Distlock\Exception).
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_NOMEM
         */
        public const NO_MEMORY = UNKNOWN;
        /**
         * A node could not be reached or did not reply in time (ConnectionException).
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_CONN
         */
        public const CONNECTION = UNKNOWN;
        /**
         * A quorum granted or renewed only after the ttl was used up: nothing is held.
         * Never "held by another owner".
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_TIMEDOUT
         */
        public const TIMED_OUT = UNKNOWN;
        /**
         * Fewer than a quorum of nodes answered (ConnectionException).
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_NOQUORUM
         */
        public const NO_QUORUM = UNKNOWN;
        /**
         * Not the owner: the lease expired, was lost or released (LockLostException).
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_NOTOWNER
         */
        public const NOT_OWNER = UNKNOWN;
        /**
         * A node refused (authentication, ACL) or answered unexpectedly (ConnectionException).
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_PROTO
         */
        public const PROTOCOL = UNKNOWN;
        /**
         * Used after close, or in a forked child (Distlock\Exception).
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_CLOSED
         */
        public const CLOSED = UNKNOWN;
        /**
         * A blocking call was cancelled; nothing is held.
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_CANCELED
         */
        public const CANCELED = UNKNOWN;
        /**
         * The system refused a resource (random source, thread, file descriptor).
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_SYSTEM
         */
        public const SYSTEM = UNKNOWN;
    }

    /** distlock.servers or the constructor's servers/options are invalid. */
    class ConfigurationException extends Exception {}

    /**
     * The servers gave no usable answer: a node could not be reached or did not reply in
     * time (CONNECTION), no quorum answered (NO_QUORUM), a node refused or answered
     * unexpectedly (PROTOCOL), or a quorum granted only after the ttl was used up
     * (TIMED_OUT). Never "held by another owner".
     */
    class ConnectionException extends Exception {}

    /**
     * Acquiring failed for want of a usable answer from the servers (tryLock(), lock(),
     * distributedLock()): nothing is held. Never "held by another owner" (that is
     * LockTimeoutException, tryLock()'s null, distributedLock()'s \Exception 500002).
     * Its code is the status's (CONNECTION, NO_QUORUM, TIMED_OUT, PROTOCOL).
     */
    class AcquireException extends ConnectionException {}

    /**
     * Renewing failed for want of a usable answer from the servers (Lock::extend()): the
     * lease was not renewed but is not known lost; it stays valid for Lock::validity()
     * more seconds. Its code is the status's (CONNECTION, NO_QUORUM, TIMED_OUT, PROTOCOL).
     */
    class RenewalException extends ConnectionException {}

    /**
     * The lease is gone: found lost by the renewal (Client::AUTO_RENEW) or by extend(),
     * or its validity ran out (Lock::check()). Code NOT_OWNER.
     */
    class LockLostException extends Exception {}

    /** Client::lock() did not get the lock within its timeout: held by another owner (code HELD). */
    class LockTimeoutException extends Exception {}

    /**
     * A client of one or more Redis nodes (Redlock over N), kept per process and reused
     * across requests (persistent). Not serializable.
     * @not-serializable
     */
    final class Client
    {
        /**
         * Flag: also get a fencing token (Lock::fence()), greater than every earlier owner's.
         * @var int
         * @cvalue DISTLOCK_FENCING
         */
        public const FENCING = UNKNOWN;
        /**
         * Flag: renew the lock in the background at ttl/3 until it is released (or found lost).
         * @var int
         * @cvalue DISTLOCK_AUTO_RENEW
         */
        public const AUTO_RENEW = UNKNOWN;
        /**
         * Flag of tryLock()/lock(): a read lock. It shares the key with other readers
         * (ours and symfony/lock's RedisStore::saveRead()) and excludes writers (a lock
         * taken without this flag). Not with Client::FENCING (a ValueError).
         * See docs/shared-locks.md.
         * @var int
         * @cvalue DISTLOCK_SHARED
         */
        public const SHARED = UNKNOWN;

        /**
         * A client for $servers; does not connect (connections are made on first use).
         * Both arguments are #[\SensitiveParameter]: stack traces don't show them.
         * @param string|null $servers one URI (redis://, rediss://, unix://, redis-sentinel://,
         *        redis-cluster://) or a comma list (Redlock); null takes distlock.servers
         * @param array $options name => value, the names of the library's option table
         *        (connect_timeout_ms, command_timeout_ms, username, password, tls_ca_file...;
         *        Client::options() lists them), int, bool or string;
         *        an option not given takes its INI value distlock.<name>
         * @throws Distlock\ConfigurationException invalid servers or option values (passwords masked)
         * @throws \ValueError an option key that is not an option
         */
        public function __construct(#[\SensitiveParameter] ?string $servers = null, #[\SensitiveParameter] array $options = []) {}

        /**
         * One attempt to take $key (no waiting); blocks for one round trip.
         * @param string $key the lock's key (1..1024 bytes)
         * @param float $ttl seconds the lock lives (rounded up to whole ms)
         * @param int $flags Client::FENCING | Client::AUTO_RENEW, or Client::SHARED |
         *        Client::AUTO_RENEW for a read lock, or 0
         * @param string|null $token the token the key is to hold (1..256 bytes, no NUL byte):
         *        a framework's owner string; null: a fresh 128-bit one. Strict, as SET NX: a
         *        key that already holds this very token is held (null). Not with
         *        Client::SHARED (a ValueError)
         * @return Lock|null the lock, or null when someone else holds the key (a writer,
         *         or for a lock without Client::SHARED also readers)
         * @throws Distlock\AcquireException the servers gave no usable answer, or the key is
         *         a semaphore (PROTOCOL); nothing is held
         * @throws Distlock\Exception out of memory, a system resource refused, not usable in this process
         * @throws \ValueError an invalid key, ttl, flags or token
         */
        public function tryLock(string $key, float $ttl = 60.0, int $flags = 0, ?string $token = null): ?Lock {}

        /**
         * Takes $key, waiting up to $timeout seconds for it (woken by its release; no polling).
         * @param string $key the lock's key (1..1024 bytes)
         * @param float $ttl seconds the lock lives (rounded up to whole ms)
         * @param float|null $timeout seconds to wait at most (null: no limit)
         * @param int $flags Client::FENCING | Client::AUTO_RENEW, or Client::SHARED |
         *        Client::AUTO_RENEW for a read lock, or 0. A writer (no Client::SHARED) that
         *        waits on readers marks its intent: readers arriving meanwhile wait for it.
         * @param string|null $token the token the key is to hold (1..256 bytes, no NUL byte);
         *        null: a fresh one. As tryLock()'s: a key holding this very token is waited for
         * @return Lock the lock
         * @throws Distlock\LockTimeoutException still held by another owner after $timeout (code HELD)
         * @throws Distlock\AcquireException the servers gave no usable answer, or the key is
         *         a semaphore (PROTOCOL); nothing is held
         * @throws Distlock\Exception the wait was cancelled (CANCELED), out of memory, not usable here
         * @throws \ValueError an invalid key, ttl, timeout, flags or token
         */
        public function lock(string $key, float $ttl = 60.0, ?float $timeout = null, int $flags = 0, ?string $token = null): Lock {}

        /**
         * One attempt to take a permit of the semaphore $key (no waiting): granted while
         * fewer than $permits unexpired permits are held. Each permit is a lease like a
         * lock (release, extend, validity, AUTO_RENEW). On N nodes a permit needs
         * floor(N*P/(P+1))+1 of them (docs/semaphores.md). Blocks for one round trip.
         * @param string $key the semaphore's key (1..1024 bytes)
         * @param int $permits how many holders at most, 1..1000000 (the latest acquire's
         *        value is the one the key keeps)
         * @param float $ttl seconds the permit lives (rounded up to whole ms)
         * @param int $flags Client::AUTO_RENEW, or 0
         * @return Lock|null the permit, or null when all permits are held
         * @throws Distlock\AcquireException the servers gave no usable answer, or the key holds
         *         a lock or read locks (PROTOCOL); nothing is held
         * @throws Distlock\Exception out of memory, a system resource refused, not usable in this process
         * @throws \ValueError an invalid key, permits, ttl or flags
         */
        public function trySemaphore(string $key, int $permits, float $ttl = 60.0, int $flags = 0): ?Lock {}

        /**
         * Takes a permit of the semaphore $key, waiting up to $timeout seconds for one
         * (woken by a release; no polling). As trySemaphore() otherwise.
         * @param string $key the semaphore's key (1..1024 bytes)
         * @param int $permits how many holders at most, 1..1000000
         * @param float $ttl seconds the permit lives (rounded up to whole ms)
         * @param float|null $timeout seconds to wait at most (null: no limit)
         * @param int $flags Client::AUTO_RENEW, or 0
         * @return Lock the permit
         * @throws Distlock\LockTimeoutException all permits still held after $timeout (code HELD)
         * @throws Distlock\AcquireException the servers gave no usable answer, or the key holds
         *         a lock or read locks (PROTOCOL); nothing is held
         * @throws Distlock\Exception the wait was cancelled (CANCELED), out of memory, not usable here
         * @throws \ValueError an invalid key, permits, ttl, timeout or flags
         */
        public function semaphore(string $key, int $permits, float $ttl = 60.0, ?float $timeout = null, int $flags = 0): Lock {}

        /**
         * One attempt to take all of $keys or none (no waiting), as one lease: one token,
         * one ttl; release(), extend() and AUTO_RENEW cover every key, and it is lost when
         * any key is lost. Each key is a plain lock: other clients see today's locks.
         * Blocks for one round trip per node (per hash slot on Cluster).
         * @param string[] $keys 1..256 distinct keys (1..1024 bytes each), in
         *        the order keys() returns them
         * @param float $ttl seconds the lock lives (rounded up to whole ms)
         * @param int $flags Client::FENCING (one fence per key, fences()) | Client::AUTO_RENEW, or 0
         * @return Lock|null the lock on every key, or null when some key is held by another
         *         owner: a lock, or read locks (the set takes each key as a writer); then none
         *         is held
         * @throws Distlock\AcquireException the servers gave no usable answer, or a key is a
         *         semaphore (PROTOCOL); nothing is held
         * @throws Distlock\Exception out of memory, a system resource refused, not usable in this process
         * @throws \ValueError an invalid, empty or repeated key, too many keys, an invalid ttl or flags
         * @throws \TypeError a key that is not a string
         */
        public function tryLockMany(array $keys, float $ttl = 60.0, int $flags = 0): ?Lock {}

        /**
         * Takes all of $keys or none, waiting up to $timeout seconds (never while holding
         * some of them: woken by the release of the key that was held). As tryLockMany()
         * otherwise.
         * @param string[] $keys 1..256 distinct keys (1..1024 bytes each)
         * @param float $ttl seconds the lock lives (rounded up to whole ms)
         * @param float|null $timeout seconds to wait at most (null: no limit)
         * @param int $flags Client::FENCING | Client::AUTO_RENEW, or 0
         * @return Lock the lock on every key
         * @throws Distlock\LockTimeoutException some key still held by another owner after $timeout (code HELD)
         * @throws Distlock\AcquireException the servers gave no usable answer, or a key is a
         *         semaphore (PROTOCOL); nothing is held
         * @throws Distlock\Exception the wait was cancelled (CANCELED), out of memory, not usable here
         * @throws \ValueError an invalid, empty or repeated key, too many keys, an invalid ttl,
         *         timeout or flags
         * @throws \TypeError a key that is not a string
         */
        public function lockMany(array $keys, float $ttl = 60.0, ?float $timeout = null, int $flags = 0): Lock {}

        /**
         * A Lock for an ownership taken elsewhere: $token holding $key (another process or
         * request, distributedLock(), a token given to tryLock()/lock(), a framework's owner
         * string). No I/O: nothing is checked on the servers. release() compare-and-deletes
         * $token (true when it held the key on a quorum, false when not: another owner's key
         * is never deleted), also when this worker abandoned a Lock of that token;
         * extend($ttl) resets the TTL where $token still holds the key. isHeld() is false and
         * validity() 0.0 until an extend() succeeds; fence() null; no renewal. Like any Lock,
         * destroying it releases it: abandon() it to let go without releasing.
         * @param string $key the lock's key (1..1024 bytes)
         * @param string $token the token that holds it (1..256 bytes, no NUL byte)
         * @return Lock the lock, not known held
         * @throws Distlock\Exception out of memory, not usable in this process
         * @throws \ValueError an invalid key or token
         */
        public function restoreLock(string $key, string $token): Lock {}

        /**
         * Who holds $key: every node asked in one parallel round; the verdict is the
         * library's (distlock_admin_holder, what `distlock status` shows). Blocks for one
         * round trip. Takes nothing and releases nothing.
         * @param string $key the key (1..1024 bytes)
         * @return array{held: bool, token: ?string, nodes: int, ttl: ?float, answered: int,
         *         taken: int, kind: string, holders: int} 'held' true when one token holds
         *         the key on a quorum; 'token' the token on the most nodes (null: no node
         *         holds one); 'nodes' how many hold it; 'ttl' the shortest lease left among
         *         them in seconds (null: none holds it, or it never expires); 'answered' /
         *         'taken' how many nodes answered / have the key at all; 'kind' 'free',
         *         'lock', 'readers', 'semaphore' or 'other' (a value of another type);
         *         'holders' the live read locks or permits ('readers', 'semaphore'), else 0
         * @throws Distlock\ConnectionException no verdict: the nodes that did not answer could
         *         change it (NO_QUORUM), a node refused (PROTOCOL); one node: its error
         * @throws Distlock\Exception out of memory, not usable in this process
         * @throws \ValueError an invalid key
         */
        public function holder(string $key): array {}

        /**
         * Deletes $key on every node whoever holds it (administrative override, as
         * `distlock release --force`). Blocks for one round trip.
         * @param string $key the key (1..1024 bytes)
         * @return int the number of nodes it was deleted on (0: nobody held it)
         * @throws Distlock\ConnectionException a node did not answer (NO_QUORUM; one node: its
         *         error) or refused the DEL (PROTOCOL); the others were deleted
         * @throws Distlock\Exception out of memory, not usable in this process
         * @throws \ValueError an invalid key
         */
        public function forceRelease(string $key): int {}

        /**
         * The library's option table, without I/O: every option a Client takes (as an
         * options key or an INI entry distlock.<name>), in the library's order (integer
         * options first). Each row: 'type' 'int' or 'string'; 'min', 'max' the accepted
         * range (a string option: 0 and its most bytes); 'default' the library's default
         * (null for a string option: unset); 'summary' one line of what it does.
         * @return array<string, array{type: string, min: int, max: int, default: int|null, summary: string}>
         *         name => row
         */
        public static function options(): array {}

        /**
         * The client's nodes, without I/O.
         * @return array<int, string> node URIs, passwords masked
         */
        public function servers(): array {}

        /**
         * How many nodes must grant a lock: N/2+1 of N. No I/O.
         * @return int the quorum
         */
        public function quorum(): int {}

        /**
         * This client's counters and histograms since it was made, without
         * I/O: name => value, the names of C's distlock_client_stats() (e.g.
         * "acquire_granted_total", "acquire_failed_total{status=\"ECONN\"}",
         * cumulative "acquire_wait_us_bucket{le=\"1024\"}").
         * @return array<string, int> name => value
         * @throws \Error the library could not read them (out of memory)
         */
        public function stats(): array {}
    }

    /**
     * A held lease: a lock or a read lock (Client::tryLock(), lock()), a permit of a
     * semaphore (trySemaphore(), semaphore()), a lock on several keys (tryLockMany(),
     * lockMany()), or an ownership taken elsewhere (restoreLock()). Destroying it releases
     * it if still held (not after abandon()). Not serializable, not
     * constructible directly.
     * @not-serializable
     */
    final class Lock
    {
        /**
         * Not constructible: use Client::tryLock() or Client::lock().
         * @throws \Error always
         */
        private function __construct() {}

        /**
         * Releases the lock (compare-and-delete on every node); blocks for one round trip.
         * @return bool true if it was still held and is now released; false if it had expired
         *         or was released before
         * @throws Distlock\ConnectionException the servers gave no usable answer
         * @throws Distlock\Exception not usable in this process (a forked child), out of memory;
         *         code CLOSED after abandon()
         */
        public function release(): bool {}

        /**
         * Resets the lock's TTL on a quorum; blocks for one round trip.
         * @param float|null $ttl the new TTL in seconds (null: the acquire TTL, or the last
         *        extend()'s; a Lock from Client::restoreLock() needs one until then)
         * @return float the new validity in seconds
         * @throws Distlock\LockLostException the lease was lost, expired or released
         * @throws Distlock\RenewalException the servers gave no usable answer; the lease is not
         *         known lost and stays valid for validity() seconds
         * @throws Distlock\Exception not usable in this process, out of memory; code CLOSED
         *         after abandon()
         * @throws \ValueError an invalid ttl
         */
        public function extend(?float $ttl = null): float {}

        /**
         * Drops this object's hold without releasing: nothing is sent, the renewal
         * (Client::AUTO_RENEW) stops, and the key keeps its token until its TTL runs out,
         * as if the holder had died. For a lock that must outlive this object (a framework
         * that releases by token later: Client::restoreLock()). Afterwards isHeld() is false,
         * validity() 0.0, key(), keys(), token(), fence() and fences() answer as before, and
         * release(), extend(), onLost() and a second abandon() throw. No I/O.
         * @return void
         * @throws Distlock\Exception code CLOSED: already abandoned
         */
        public function abandon(): void {}

        /**
         * Seconds of validity left; no I/O.
         * @return float the seconds left (0.0 once released, lost or expired)
         */
        public function validity(): float {}

        /**
         * Whether the lock is still held as far as this process knows; no I/O.
         * @return bool true while not released, not found lost and its validity not run out
         */
        public function isHeld(): bool {}

        /**
         * true once the lease was found lost: by the renewal thread of an AUTO_RENEW lock
         * (in the background, also while PHP runs other code), or by extend(). No I/O.
         * false after abandon() (nobody found it lost: this object let go of it).
         * @return bool true once found lost
         */
        public function isLost(): bool {}

        /**
         * Throws LockLostException when this lock is no longer held: found lost, its
         * validity run out, released or abandoned. Runs any onLost callbacks due first (a safe point).
         * No I/O.
         * @return void
         * @throws Distlock\LockLostException the lock is no longer held (code NOT_OWNER)
         */
        public function check(): void {}

        /**
         * $callback(Lock $lock) is called once, in this PHP thread, at the first safe point
         * after the lock is found lost (null removes it). Safe points: the start of every
         * function and method of this extension (distributedLock(), distributedUnlock(),
         * every Client and Lock method) and check(). An exception it throws propagates from
         * that call, which then does nothing else.
         * @param callable|null $callback function (Lock $lock): void, or null to remove it
         * @return void
         * @throws Distlock\Exception code CLOSED after abandon() (an abandoned lock is never
         *         found lost)
         */
        public function onLost(?callable $callback): void {}

        /**
         * The key this lock was taken for (the first of tryLockMany()'s / lockMany()'s keys).
         * @return string the key
         */
        public function key(): string {}

        /**
         * Every key this lock holds: its one key, or tryLockMany()'s / lockMany()'s keys in
         * their order.
         * @return array<int, string> the keys
         */
        public function keys(): array {}

        /**
         * The token the key holds while the lock is ours (32 hex characters, or the $token
         * given to tryLock(), lock() or restoreLock()).
         * @return string the token
         */
        public function token(): string {}

        /**
         * The fencing token of this ownership.
         * @return int|null the fencing token when acquired with Client::FENCING, else null
         */
        public function fence(): ?int {}

        /**
         * One fencing token per key, in the order of keys(): each greater than every
         * earlier owner's of that key.
         * @return array<int, int>|null the fences when acquired with Client::FENCING, else null
         */
        public function fences(): ?array {}
    }
}
