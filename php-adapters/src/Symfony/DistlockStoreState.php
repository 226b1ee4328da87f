<?php

declare(strict_types=1);

namespace Distlock\Symfony;

use Distlock\Lock as DistlockLock;

/**
 * @internal What a Key holds: our lock handle and whether it is a read lock.
 *
 * Symfony releases a lock only through the store (Lock::release(), or
 * Lock::__destruct() when autoRelease is true); a Key dropped without that
 * (autoRelease false, or a Lock never released) keeps its lock in Redis until
 * the TTL, as with RedisStore. The extension releases a handle that PHP
 * frees, so a handle still held when its Key goes is abandoned instead.
 *
 * The lock belongs to the process that took it: a forked child inherits the
 * Key (and symfony's Lock, whose destructor releases) but not the lock; the
 * extension refuses the handle there, and the store treats the Key as
 * holding nothing in that process.
 */
final class DistlockStoreState
{
    public ?DistlockLock $lock;
    public bool $shared;
    public int $pid;

    public function __construct(DistlockLock $lock, bool $shared)
    {
        $this->lock = $lock;
        $this->shared = $shared;
        $this->pid = getmypid();
    }

    /** Whether this process took the lock (not a forked child of the one that did). */
    public function ownedHere(): bool
    {
        return $this->pid === getmypid();
    }

    public function __destruct()
    {
        if ($this->lock !== null && $this->ownedHere()) {
            try {
                $this->lock->abandon();
            } catch (\Throwable $e) {
                // a destructor must not throw; the TTL ends the lock anyway
            }
        }
    }
}
