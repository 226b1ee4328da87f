<?php
/*
 * The expiring-store contract: putOffExpiration() sets a new TTL in Redis,
 * the Key's remaining lifetime follows it, an expired lock frees the resource
 * for another Key, a lifetime already run out is LockExpiredException (and
 * leaves nothing held), a lost lock cannot be put off.
 */

declare(strict_types=1);

namespace Distlock\Tests\Symfony;

require_once __DIR__ . '/StoreTestCase.php';

use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Key;

final class DistlockStoreExpiringTest extends StoreTestCase
{
    /** @dataProvider nodeCounts */
    public function testPutOffExpirationSetsTheTtlInRedisAndOnTheKey(int $nodes): void
    {
        $store = $this->store($nodes, 5.0);
        $resource = $this->resource();
        $key = new Key($resource);

        $store->save($key);
        $this->assertLessThanOrEqual(5.0, $key->getRemainingLifetime());
        $store->putOffExpiration($key, 60.0);
        $this->assertTrue($this->onEveryNode($nodes, fn (\Redis $r) => $r->pttl($resource) > 30000
                                                                   && $r->pttl($resource) <= 60000));
        // The Key keeps the lower of its lifetimes (symfony's Key::reduceLifetime):
        // Lock::refresh() resets it first, as here.
        $key->resetLifetime();
        $store->putOffExpiration($key, 1.0);
        $this->assertGreaterThan(0.0, $key->getRemainingLifetime());
        $this->assertLessThanOrEqual(1.0, $key->getRemainingLifetime());
        $this->assertTrue($this->onEveryNode($nodes, fn (\Redis $r) => $r->pttl($resource) <= 1000));
        $store->delete($key);
    }

    public function testAnExpiredLockFreesTheResourceForAnotherKey(): void
    {
        $store = $this->store();
        $resource = $this->resource();
        $key1 = new Key($resource);
        $key2 = new Key($resource);

        $store->save($key1);
        $t0 = microtime(true);
        $store->putOffExpiration($key1, 1.0);
        $this->assertTrue($store->exists($key1));
        $got = self::waitFor(function () use ($store, $key2): bool {
            try {
                $store->save($key2);

                return true;
            } catch (LockConflictedException $e) {
                return false;
            }
        });
        $this->assertTrue($got, 'the resource was not free after its TTL');
        // not before the TTL ran out
        $this->assertGreaterThanOrEqual(0.99, microtime(true) - $t0);
        $this->assertFalse($store->exists($key1));
        $this->assertTrue($store->exists($key2));
        // the expired Key's lock is lost: it cannot be put off any more
        try {
            $store->putOffExpiration($key1, 10.0);
            $this->fail('an expired lock was put off');
        } catch (LockConflictedException $e) {
            $this->assertTrue($store->exists($key2));
        }
        $store->delete($key2);
    }

    public function testATtlTooShortToHoldIsLockExpiredAndLeavesNothingHeld(): void
    {
        $store = $this->store();
        $resource = $this->resource();
        $key = new Key($resource);
        [$r] = $this->redisNodes();

        $store->save($key);
        try {
            $store->putOffExpiration($key, 1 / 1000000);
            $this->fail('a microsecond TTL was accepted as a lease');
        } catch (LockExpiredException $e) {
            $this->assertStringContainsString($resource, $e->getMessage());
        }
        $this->assertFalse($store->exists($key));
        $this->assertSame(0, $r->exists($resource));
    }

    public function testAKeyWhoseLifetimeRanOutIsNotSavedAndAnotherKeyIs(): void
    {
        $store = $this->store();
        $resource = $this->resource();
        $key1 = new Key($resource);
        $key2 = new Key($resource);

        $key1->reduceLifetime(0);
        $this->assertTrue($key1->isExpired());
        try {
            $store->save($key1);
            $this->fail('a Key whose lifetime ran out was saved');
        } catch (LockExpiredException $e) {
            $this->assertFalse($store->exists($key1));
        }
        // the attempt released what it took
        $store->save($key2);
        $this->assertTrue($store->exists($key2));
        $store->delete($key2);
    }

    public function testATtlBeyondTheMaximumIsInvalidAndTheLockStaysHeld(): void
    {
        $store = $this->store();
        $resource = $this->resource();
        $key = new Key($resource);
        [$r] = $this->redisNodes();

        $store->save($key);
        try {
            $store->putOffExpiration($key, 1e9);
            $this->fail('a TTL of 1e9 s was accepted');
        } catch (InvalidTtlException $e) {
            $this->assertStringContainsString('at most', $e->getMessage());
        }
        $this->assertTrue($store->exists($key));
        $this->assertGreaterThan(0, $r->pttl($resource));
        $store->delete($key);
    }

    public function testAKeyThatHoldsNothingCannotBePutOff(): void
    {
        $store = $this->store();
        $this->expectException(LockConflictedException::class);
        $store->putOffExpiration(new Key($this->resource()), 10.0);
    }
}
