<?php
/*
 * A symfony/lock store on distlock: LockFactory, Lock, acquire(true),
 * acquireRead(), refresh() and release() work unchanged; the locking itself
 * (tokens, TTL rounding, quorum, waiting on release) is the extension's.
 * docs/symfony.md says how to switch and what differs from RedisStore.
 */

declare(strict_types=1);

namespace Distlock\Symfony;

use Distlock\Client;
use Distlock\Exception as DistlockException;
use Distlock\Lock as DistlockLock;
use Distlock\LockLostException;
use Symfony\Component\Lock\BlockingSharedLockStoreInterface;
use Symfony\Component\Lock\BlockingStoreInterface;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Exception\LockReleasingException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\SharedLockStoreInterface;

/*
 * Symfony 5.4 has BlockingSharedLockStoreInterface (waitAndSaveRead); an
 * installed symfony/lock without it still gets every other behaviour.
 */
if (interface_exists(BlockingSharedLockStoreInterface::class)) {
    /** @internal the store's interfaces where symfony/lock has the blocking shared one */
    interface DistlockStoreInterfaces extends BlockingStoreInterface, BlockingSharedLockStoreInterface
    {
    }
} else {
    /** @internal the store's interfaces where symfony/lock has no blocking shared one */
    interface DistlockStoreInterfaces extends BlockingStoreInterface, SharedLockStoreInterface
    {
    }
}

/*
 * The methods declare the return types symfony/lock 6 gives its interfaces;
 * 5.4's interfaces have none, and a typed implementation satisfies both.
 */
final class DistlockStore implements DistlockStoreInterfaces
{
    /** The Key state's name: our handle of the lock that Key holds. */
    private const STATE = self::class;

    private const CONNECTION_SCHEME = 'distlock:';

    private Client $client;
    private float $initialTtl;

    /**
     * @param Client $client     the distlock client (one node or a Redlock list)
     * @param float  $initialTtl seconds a lock lives when taken, as RedisStore's
     *                           $initialTtl (Lock::acquire() then refreshes it to
     *                           the Lock's own TTL)
     */
    public function __construct(Client $client, float $initialTtl = 300.0)
    {
        if (!($initialTtl > 0)) {
            throw new InvalidTtlException(sprintf('"%s()" expects a strictly positive TTL. Got %s.', __METHOD__, $initialTtl));
        }
        $this->client = $client;
        $this->initialTtl = $initialTtl;
    }

    /**
     * A store from a DSN, as StoreFactory::createStore() takes for Symfony's own
     * stores: "distlock:" followed by the servers the extension's Client takes
     * (one URI or a comma list), or "distlock:" alone for the distlock.servers
     * INI setting.
     */
    public static function fromDsn(#[\SensitiveParameter] string $dsn, float $initialTtl = 300.0,
                                   #[\SensitiveParameter] array $options = []): self
    {
        if (strncmp($dsn, self::CONNECTION_SCHEME, strlen(self::CONNECTION_SCHEME)) !== 0) {
            // the DSN itself is not repeated: it may hold a password
            throw new InvalidArgumentException('A distlock DSN starts with "distlock:", followed by the servers (redis://...).');
        }
        $servers = substr($dsn, strlen(self::CONNECTION_SCHEME));
        try {
            $client = new Client($servers === '' ? null : $servers, $options);
        } catch (DistlockException | \ValueError $e) {
            // the extension's message masks passwords
            throw new InvalidArgumentException(sprintf('Invalid distlock DSN: %s', $e->getMessage()), 0, $e);
        }

        return new self($client, $initialTtl);
    }

    public function save(Key $key): void
    {
        $state = $this->held($key);
        if ($state !== null && !$state->shared) {
            // A write lock saved again: its TTL back to $initialTtl, as RedisStore does.
            $this->extendOrRetake($key, $state, $this->initialTtl);
        } elseif ($state !== null) {
            $this->promote($key, $state, false);
        } else {
            $this->take($key, false, false);
        }
    }

    public function waitAndSave(Key $key): void
    {
        $state = $this->held($key);
        if ($state !== null && !$state->shared) {
            $this->extendOrRetake($key, $state, $this->initialTtl);
        } elseif ($state !== null) {
            $this->promote($key, $state, true);
        } else {
            $this->take($key, false, true);
        }
    }

    public function saveRead(Key $key): void
    {
        $state = $this->held($key);
        if ($state !== null && $state->shared) {
            $this->extendOrRetake($key, $state, $this->initialTtl);
        } elseif ($state !== null) {
            $this->demote($key, $state);
        } else {
            $this->take($key, true, false);
        }
    }

    public function waitAndSaveRead(Key $key): void
    {
        $state = $this->held($key);
        if ($state !== null && $state->shared) {
            $this->extendOrRetake($key, $state, $this->initialTtl);
        } elseif ($state !== null) {
            $this->demote($key, $state);
        } else {
            $this->take($key, true, true);
        }
    }

    public function putOffExpiration(Key $key, float $ttl): void
    {
        $state = $this->held($key);
        if ($state === null) {
            throw new LockConflictedException(sprintf('The "%s" lock is not held by this key.', $key));
        }
        // RedisStore's order: the Key's lifetime is cut to $ttl before the
        // call, so a TTL that runs out before it is answered is an expiry.
        $key->reduceLifetime($ttl);
        try {
            $validity = $state->lock->extend($ttl);
        } catch (LockLostException $e) {
            $this->forget($key);
            throw new LockConflictedException(sprintf('The "%s" lock was lost: %s', $key, $e->getMessage()), 0, $e);
        } catch (\ValueError $e) {
            // The core refuses a TTL it cannot hold a lease for (at or below
            // its clock-drift allowance, or beyond its maximum): one that has
            // already run out on the Key is symfony's expiry, any other a bad TTL.
            $this->checkNotExpired($key);
            throw new InvalidTtlException(sprintf('Invalid TTL for the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        } catch (DistlockException $e) {
            throw new LockStorageException(sprintf('Failed to put off the expiration of the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        $key->reduceLifetime($validity);
        $this->checkNotExpired($key);
    }

    public function delete(Key $key): void
    {
        $state = $this->held($key);
        if ($state === null) {
            return;
        }
        try {
            $state->lock->release();
        } catch (DistlockException $e) {
            throw new LockReleasingException(sprintf('Failed to release the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        $this->forget($key);
    }

    public function exists(Key $key): bool
    {
        $state = $this->held($key);

        return $state !== null && $state->lock->isHeld();
    }

    /**
     * The Key's state when this store gave it a lock that was not released,
     * in this process, or null. A forked child's copy of the Key holds
     * nothing: its lock is the parent's (RedisStore's child would release it).
     */
    private function held(Key $key): ?DistlockStoreState
    {
        if (!$key->hasState(self::STATE)) {
            return null;
        }
        $state = $key->getState(self::STATE);

        return $state instanceof DistlockStoreState && $state->ownedHere() ? $state : null;
    }

    private function forget(Key $key): void
    {
        if ($key->hasState(self::STATE)) {
            $state = $key->getState(self::STATE);
            $key->removeState(self::STATE);
            if ($state instanceof DistlockStoreState) {
                $state->lock = null;
            }
        }
    }

    /** A fresh lock for a Key that holds none: LockConflictedException when someone else holds it. */
    private function take(Key $key, bool $shared, bool $wait): void
    {
        $flags = $shared ? Client::SHARED : 0;
        try {
            $lock = $wait
                ? $this->client->lock((string) $key, $this->initialTtl, null, $flags)
                : $this->client->tryLock((string) $key, $this->initialTtl, $flags);
        } catch (\ValueError $e) {
            throw new InvalidArgumentException(sprintf('The "%s" lock cannot be taken: %s', $key, $e->getMessage()), 0, $e);
        } catch (DistlockException $e) {
            throw new LockStorageException(sprintf('Failed to store the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        if ($lock === null) {
            throw new LockConflictedException(sprintf('The "%s" lock is held by someone else.', $key));
        }
        $this->keep($key, $lock, $shared);
    }

    private function keep(Key $key, DistlockLock $lock, bool $shared): void
    {
        // The handle is a live object: a Key holding one cannot travel to
        // another process (symfony's own stores with in-process state do the same).
        $key->markUnserializable();
        $key->setState(self::STATE, new DistlockStoreState($lock, $shared));
        $key->reduceLifetime($lock->validity());
        $this->checkNotExpired($key);
    }

    /** The same lock saved again: a fresh TTL; taken afresh if it was lost meanwhile. */
    private function extendOrRetake(Key $key, DistlockStoreState $state, float $ttl): void
    {
        try {
            $validity = $state->lock->extend($ttl);
        } catch (LockLostException $e) {
            // RedisStore takes a free key again for a Key whose entry expired.
            $this->forget($key);
            $this->take($key, $state->shared, false);

            return;
        } catch (DistlockException $e) {
            throw new LockStorageException(sprintf('Failed to store the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        $key->reduceLifetime($validity);
        $this->checkNotExpired($key);
    }

    /**
     * A read lock becomes a write lock. RedisStore promotes a reader that is
     * the only one, atomically, and refuses otherwise keeping the read lock.
     * distlock has no atomic promotion: a reader among others is refused
     * after asking who holds the key (its read lock untouched); a sole reader's
     * lock is released and a write lock taken (or waited for), and when
     * someone got in between, the read lock is taken back if it still can be.
     */
    private function promote(Key $key, DistlockStoreState $state, bool $wait): void
    {
        if (!$wait) {
            try {
                $holder = $this->client->holder((string) $key);
            } catch (DistlockException $e) {
                throw new LockStorageException(sprintf('Failed to store the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
            }
            if ($holder['kind'] === 'readers' && $holder['holders'] > 1) {
                throw new LockConflictedException(sprintf('The "%s" lock is read by others: not promoted.', $key));
            }
        }
        $this->releaseForChange($key, $state);
        try {
            $this->take($key, false, $wait);
        } catch (LockConflictedException $e) {
            try {
                $this->take($key, true, false);
            } catch (LockConflictedException $lost) {
                // neither: the Key holds nothing now
            }
            throw $e;
        }
    }

    /**
     * A write lock becomes a read lock (RedisStore: atomically). Released and
     * taken again as a read lock: a writer that gets in between wins, and
     * this Key then holds nothing (LockConflictedException).
     */
    private function demote(Key $key, DistlockStoreState $state): void
    {
        $this->releaseForChange($key, $state);
        $this->take($key, true, false);
    }

    private function releaseForChange(Key $key, DistlockStoreState $state): void
    {
        try {
            $state->lock->release();
        } catch (DistlockException $e) {
            throw new LockStorageException(sprintf('Failed to change the "%s" lock: %s', $key, $e->getMessage()), 0, $e);
        }
        $this->forget($key);
    }

    /** symfony's ExpiringStoreTrait rule: a Key whose lifetime ran out is released and refused. */
    private function checkNotExpired(Key $key): void
    {
        if ($key->isExpired()) {
            try {
                $this->delete($key);
            } catch (\Exception $e) {
                // the expiry is the error to report, not a failed release
            }
            throw new LockExpiredException(sprintf('Failed to store the "%s" lock.', $key));
        }
    }
}
