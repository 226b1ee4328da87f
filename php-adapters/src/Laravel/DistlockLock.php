<?php
/*
 * A Laravel cache lock (Cache::lock($name, $seconds, $owner)) held on distlock.
 *
 * Laravel's semantics, translated onto the extension:
 *  - the owner string is the lock's token (Client::tryLock()/lock() `token:`),
 *    so Cache::restoreLock($name, $owner) in another request or a queued job
 *    releases it (Client::restoreLock(), a compare-and-delete of that token);
 *  - a lock outlives this PHP object, as Laravel's RedisLock (a key with an
 *    expiry) does: the extension's handle is abandoned, never released, when
 *    this object lets go of it;
 *  - $seconds <= 0 means "no expiry" in Laravel: here a lease of the store's
 *    $leaseSeconds, renewed in the background (Client::AUTO_RENEW) while this
 *    object lives; once it is gone the key expires within that lease;
 *  - block() waits with the library's wait (woken by the release, no polling);
 *    a budget beyond the longest wait the library measures is a wait without
 *    limit (waiting longer than that, about 24.8 days, is not observable);
 *  - an argument the library refuses (a name over its key limit, $seconds
 *    over its TTL maximum, an owner outside its token rule) is Laravel's
 *    InvalidArgumentException carrying the library's message, which names
 *    the limit: a lock is never shorter than asked.
 * Every rule (token checks, TTL rounding, limits, quorum) is the extension's.
 */

declare(strict_types=1);

namespace Distlock\Laravel;

use Distlock\Client;
use Distlock\LockTimeoutException as DistlockLockTimeoutException;
use Illuminate\Cache\Lock;
use Illuminate\Contracts\Cache\LockTimeoutException;

class DistlockLock extends Lock
{
    /**
     * The longest wait Client::lock() takes as $timeout, in seconds (its
     * maximum, DISTLOCK_TTL_MAX ms); longer budgets are passed as null (no
     * limit). DistlockLockArgumentsTest checks the extension still agrees.
     */
    public const WAIT_MAX_SECONDS = 2147483.647;

    /**
     * The extension's handle of an auto-renewed lease ($seconds <= 0) while
     * this object holds it; null otherwise (a lock with an expiry lives on
     * the servers only, as Laravel's RedisLock key does).
     */
    private ?\Distlock\Lock $lease = null;

    /**
     * The objects of this request (process) holding a lease, let go of at
     * shutdown: a fatal error (E_ERROR, memory_limit, max_execution_time)
     * skips every __destruct() but still runs the shutdown functions, and
     * an extension handle freed unabandoned releases its key.
     *
     * @var \WeakMap<self, true>|null
     */
    private static ?\WeakMap $leased = null;

    /**
     * @param Client $client the distlock client the lock is taken on
     * @param string $name the key (the store's prefix included)
     * @param int|float $seconds the lock's lifetime; <= 0: no expiry (an auto-renewed lease)
     * @param string|null $owner the token; null: Laravel's random owner
     * @param float $leaseSeconds the TTL of the auto-renewed lease of a lock without expiry
     */
    public function __construct(
        private Client $client,
        $name,
        $seconds,
        $owner = null,
        private float $leaseSeconds = 60.0,
    ) {
        parent::__construct($name, $seconds, $owner);
    }

    /**
     * One attempt to take the lock with the owner as its token (no waiting).
     * Strict, as Laravel's SET NX: a key already holding this owner is held.
     */
    public function acquire(): bool
    {
        $lock = $this->refusingBadArguments(fn () => $this->client->tryLock(
            $this->name, $this->ttl(), $this->flags(), token: (string) $this->owner));

        return $lock !== null && $this->keep($lock);
    }

    /**
     * Waits up to $seconds for the lock (the library's wait: woken by the
     * release, not by polling; betweenBlockedAttemptsSleepFor() has no effect),
     * then runs $callback and releases, as Laravel's block() does.
     *
     * @throws LockTimeoutException still held by another owner after $seconds
     */
    public function block($seconds, $callback = null)
    {
        try {
            // Laravel's block() makes one attempt whatever $seconds is, a
            // negative one too (its wait is already over): a timeout of 0.
            $timeout = (float) $seconds > self::WAIT_MAX_SECONDS ? null : max(0.0, (float) $seconds);
            $lock = $this->refusingBadArguments(fn () => $this->client->lock(
                $this->name, $this->ttl(), $timeout, $this->flags(), token: (string) $this->owner));
        } catch (DistlockLockTimeoutException $e) {
            throw new LockTimeoutException($e->getMessage(), 0, $e);
        }
        $this->keep($lock);

        if (is_callable($callback)) {
            try {
                return $callback();
            } finally {
                $this->release();
            }
        }

        return true;
    }

    /**
     * Releases the lock if this owner holds it (compare-and-delete of the
     * owner's token); never deletes another owner's key.
     *
     * @return bool true when this owner held it and it is now released
     */
    public function release(): bool
    {
        if ($this->lease !== null) {
            $lease = $this->lease;
            $this->lease = null;
            try {
                return $lease->release();
            } catch (\Distlock\Exception $e) {
                // A handle inherited across fork() is its parent's (CLOSED):
                // this process releases by the owner's token below, as
                // Laravel's release() does in any process.
                if ($e->getCode() !== \Distlock\Exception::CLOSED) {
                    throw $e;
                }
            }
        }

        // Taken by this object with an expiry, in another request, or by a
        // restored lock: the key holds the owner's token (or not), and the
        // restored handle deletes it only if it does.
        return $this->refusingBadArguments(
            fn () => $this->client->restoreLock($this->name, (string) $this->owner))->release();
    }

    /** Deletes the key whoever holds it (Client::forceRelease(), on every node). */
    public function forceRelease(): void
    {
        $this->letGo();
        $this->refusingBadArguments(fn () => $this->client->forceRelease($this->name));
    }

    /**
     * Whether the key is held by this owner: the library's quorum verdict
     * (Client::holder()). Public, as in later Laravel releases.
     */
    public function isOwnedByCurrentProcess(): bool
    {
        return $this->getCurrentOwner() === (string) $this->owner;
    }

    /**
     * The token holding the key on a quorum, or null when none does.
     */
    protected function getCurrentOwner(): ?string
    {
        $holder = $this->refusingBadArguments(fn () => $this->client->holder($this->name));

        return $holder['held'] ? $holder['token'] : null;
    }

    /**
     * A clone is another object of the same owner: it holds no handle (the
     * original's renewal must not end with the clone), and its release()
     * is the owner's compare-and-delete, as a restored lock's.
     */
    public function __clone()
    {
        $this->lease = null;
    }

    /** The lock outlives this object: its renewal stops, the key keeps its TTL. */
    public function __destruct()
    {
        $this->letGo();
    }

    /**
     * Runs a call of the extension, its ValueError (the library refusing a
     * name, a TTL or an owner) rethrown as the InvalidArgumentException
     * Laravel throws for bad arguments, with the library's message.
     *
     * @template T
     * @param callable(): T $call
     * @return T
     */
    private function refusingBadArguments(callable $call): mixed
    {
        try {
            return $call();
        } catch (\ValueError $e) {
            throw new \InvalidArgumentException(
                sprintf('Cache lock [%s] for %s seconds: %s',
                    strlen($this->name) > 80 ? substr($this->name, 0, 80) . '...' : $this->name,
                    var_export($this->seconds, true), $e->getMessage()),
                0,
                $e,
            );
        }
    }

    private function noExpiry(): bool
    {
        return $this->seconds <= 0;
    }

    private function ttl(): float
    {
        return $this->noExpiry() ? $this->leaseSeconds : (float) $this->seconds;
    }

    private function flags(): int
    {
        return $this->noExpiry() ? Client::AUTO_RENEW : 0;
    }

    /** Keeps an auto-renewed lease's handle; lets go of any other at once. */
    private function keep(\Distlock\Lock $lock): bool
    {
        // A lease taken earlier by this object and since lost is replaced;
        // abandoning (not releasing) it: its token is this owner's, which now
        // holds the key again.
        $this->letGo();
        if ($this->noExpiry()) {
            $this->lease = $lock;
            self::letGoAtShutdown($this);
        } else {
            $lock->abandon();
        }

        return true;
    }

    private static function letGoAtShutdown(self $lock): void
    {
        if (self::$leased === null) {
            self::$leased = new \WeakMap();
            register_shutdown_function(static function (): void {
                foreach (self::$leased as $held => $_) {
                    $held->letGo();
                }
            });
        }
        self::$leased[$lock] = true;
    }

    private function letGo(): void
    {
        if ($this->lease !== null) {
            $lease = $this->lease;
            $this->lease = null;
            $lease->abandon();
        }
    }
}
