<?php

/**
 * @generate-class-entries
 * @undocumentable
 */

namespace {
    /**
     * Drop-in for the ERP userland Process_RequestCounter::distributedLock():
     * same defaults, same results. Throws \Exception (code 500002) when the
     * key is held, Distlock\ConnectionException when Redis cannot be reached.
     */
    function distributedLock(string $key = '', int $ttl = 60, string|int|null $random = null, string $tipMsg = ''): string|int {}

    /** true when this token held the key and it is now released, int 1 otherwise. */
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
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_INVALID
         */
        public const INVALID = UNKNOWN;
        /**
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_NOMEM
         */
        public const NO_MEMORY = UNKNOWN;
        /**
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
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_NOQUORUM
         */
        public const NO_QUORUM = UNKNOWN;
        /**
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_NOTOWNER
         */
        public const NOT_OWNER = UNKNOWN;
        /**
         * @var int
         * @cvalue DISTLOCK_PHP_CODE_PROTO
         */
        public const PROTOCOL = UNKNOWN;
        /**
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

    /** @not-serializable */
    final class Client
    {
        /**
         * @var int
         * @cvalue DISTLOCK_FENCING
         */
        public const FENCING = UNKNOWN;
        /**
         * @var int
         * @cvalue DISTLOCK_AUTO_RENEW
         */
        public const AUTO_RENEW = UNKNOWN;

        /**
         * $servers: one redis:// or unix:// URI or a comma list (Redlock);
         * null takes distlock.servers. $options: the library's options by
         * name (connect_timeout_ms, username, wait_replicas, ...; `distlock
         * --help` lists them), int, bool or string; default: the INI values
         * distlock.<name>, else the library's defaults.
         * Both are #[\SensitiveParameter]: stack traces don't show them.
         */
        public function __construct(#[\SensitiveParameter] ?string $servers = null, #[\SensitiveParameter] array $options = []) {}

        /** One attempt; null when someone else holds the key. */
        public function tryLock(string $key, float $ttl = 60.0, int $flags = 0): ?Lock {}

        /** Waits up to $timeout seconds (null: no limit); LockTimeoutException after that. */
        public function lock(string $key, float $ttl = 60.0, ?float $timeout = null, int $flags = 0): Lock {}

        /** @return array<int, string> node URIs, passwords masked */
        public function servers(): array {}

        public function quorum(): int {}

        /**
         * This client's counters and histograms since it was made, without
         * I/O: name => value, the names of C's distlock_client_stats() (e.g.
         * "acquire_granted_total", "acquire_failed_total{status=\"ECONN\"}",
         * cumulative "acquire_wait_us_bucket{le=\"1024\"}").
         * @return array<string, int>
         */
        public function stats(): array {}
    }

    /** @not-serializable */
    final class Lock
    {
        private function __construct() {}

        /** true if it was still held and is now released; false if it had expired or was released before. */
        public function release(): bool {}

        /** New TTL in seconds (null: the acquire TTL); returns the new validity in seconds. */
        public function extend(?float $ttl = null): float {}

        /** Seconds of validity left (0.0 once released, lost or expired). */
        public function validity(): float {}

        public function isHeld(): bool {}

        /**
         * true once the lease was found lost: by the renewal thread of an AUTO_RENEW lock
         * (in the background, also while PHP runs other code), or by extend().
         */
        public function isLost(): bool {}

        /**
         * Throws LockLostException when this lock is no longer held: found lost, its
         * validity run out, or released. Runs any onLost callbacks due first (a safe point).
         */
        public function check(): void {}

        /**
         * $callback(Lock $lock) is called once, in this PHP thread, at the first safe point
         * after the lock is found lost (null removes it). Safe points: the start of every
         * function and method of this extension (distributedLock(), distributedUnlock(),
         * every Client and Lock method) and check(). An exception it throws propagates from
         * that call, which then does nothing else.
         */
        public function onLost(?callable $callback): void {}

        public function key(): string {}

        public function token(): string {}

        /** Fencing token when acquired with Client::FENCING, else null. */
        public function fence(): ?int {}
    }
}
