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
 */
final class DistlockStoreState
{
    public ?DistlockLock $lock;
    public bool $shared;

    public function __construct(DistlockLock $lock, bool $shared)
    {
        $this->lock = $lock;
        $this->shared = $shared;
    }

    public function __destruct()
    {
        if ($this->lock !== null) {
            try {
                $this->lock->abandon();
            } catch (\Throwable $e) {
                // a destructor must not throw; the TTL ends the lock anyway
            }
        }
    }
}
