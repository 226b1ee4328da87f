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
 *  - block() waits with the library's wait (woken by the release, no polling).
 * Every rule (token checks, TTL rounding, quorum) is the extension's.
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
     * The extension's handle of an auto-renewed lease ($seconds <= 0) while
     * this object holds it; null otherwise (a lock with an expiry lives on
     * the servers only, as Laravel's RedisLock key does).
     */
    private ?\Distlock\Lock $lease = null;

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
        $lock = $this->client->tryLock($this->name, $this->ttl(), $this->flags(), token: (string) $this->owner);

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
            $lock = $this->client->lock($this->name, $this->ttl(), max(0.0, (float) $seconds), $this->flags(),
                token: (string) $this->owner);
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

            return $lease->release();
        }

        // Taken by this object with an expiry, in another request, or by a
        // restored lock: the key holds the owner's token (or not), and the
        // restored handle deletes it only if it does.
        return $this->client->restoreLock($this->name, (string) $this->owner)->release();
    }

    /** Deletes the key whoever holds it (Client::forceRelease(), on every node). */
    public function forceRelease(): void
    {
        $this->letGo();
        $this->client->forceRelease($this->name);
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
        $holder = $this->client->holder($this->name);

        return $holder['held'] ? $holder['token'] : null;
    }

    /** The lock outlives this object: its renewal stops, the key keeps its TTL. */
    public function __destruct()
    {
        $this->letGo();
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
        } else {
            $lock->abandon();
        }

        return true;
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
