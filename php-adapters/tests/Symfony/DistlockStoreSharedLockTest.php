<?php
/*
 * SharedLockStoreInterface on distlock: read locks share a resource and
 * exclude writers, a writer excludes readers, and RedisStore's promotion
 * (a sole reader's save() makes it the writer; with other readers it is
 * refused and the Key keeps reading) and demotion (a writer's saveRead()
 * lets other readers in).
 */

declare(strict_types=1);

namespace Distlock\Tests\Symfony;

require_once __DIR__ . '/StoreTestCase.php';

use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Key;

final class DistlockStoreSharedLockTest extends StoreTestCase
{
    /** @dataProvider nodeCounts */
    public function testReadersShareAResourceAndExcludeAWriterUntilTheLastLeaves(int $nodes): void
    {
        $store = $this->store($nodes);
        $resource = $this->resource();
        [$key1, $key2, $key3] = [new Key($resource), new Key($resource), new Key($resource)];

        $store->saveRead($key1);
        $store->saveRead($key2);
        $this->assertTrue($store->exists($key1));
        $this->assertTrue($store->exists($key2));
        // both read locks are in Redis (the shared sorted set), on every node
        $this->assertTrue($this->onEveryNode($nodes, fn (\Redis $r) => $r->zCard($resource) === 2));
        $this->assertConflict(fn () => $store->save($key3));
        $this->assertTrue($store->exists($key1));
        $this->assertTrue($store->exists($key2));
        $this->assertFalse($store->exists($key3));

        $store->delete($key1);
        $this->assertConflict(fn () => $store->save($key3));
        $store->delete($key2);
        $store->save($key3);
        $this->assertTrue($store->exists($key3));
        $store->delete($key3);
        $this->assertFalse($store->exists($key3));
    }

    /** @dataProvider nodeCounts */
    public function testAWriterExcludesReadersUntilItIsDeleted(int $nodes): void
    {
        $store = $this->store($nodes);
        $resource = $this->resource();
        [$key1, $key2] = [new Key($resource), new Key($resource)];

        $store->save($key1);
        $this->assertConflict(fn () => $store->saveRead($key2));
        $this->assertTrue($store->exists($key1));
        $this->assertFalse($store->exists($key2));
        $store->delete($key1);
        $store->saveRead($key2);
        $this->assertTrue($store->exists($key2));
        $store->delete($key2);
    }

    public function testASoleReaderIsPromotedToTheWriter(): void
    {
        $store = $this->store();
        $resource = $this->resource();
        [$key1, $key2] = [new Key($resource), new Key($resource)];
        [$r] = $this->redisNodes();

        $store->saveRead($key1);
        $store->save($key1);
        $this->assertTrue($store->exists($key1));
        // it is the writer now: readers are refused
        $this->assertConflict(fn () => $store->saveRead($key2));
        $this->assertSame(\Redis::REDIS_STRING, $r->type($resource));
        $store->delete($key1);
        $store->saveRead($key2);
        $this->assertTrue($store->exists($key2));
        $store->delete($key2);
    }

    public function testAReaderAmongOthersIsNotPromotedAndKeepsReading(): void
    {
        $store = $this->store();
        $resource = $this->resource();
        [$key1, $key2, $key3] = [new Key($resource), new Key($resource), new Key($resource)];

        [$r] = $this->redisNodes();

        $store->saveRead($key1);
        $store->saveRead($key2);
        $readers = $r->zRange($resource, 0, -1);
        sort($readers);
        $this->assertConflict(fn () => $store->save($key1));
        // the refusal left both read locks as they were (the same tokens: not
        // released and taken again, which would let a writer in meanwhile)
        $after = $r->zRange($resource, 0, -1);
        sort($after);
        $this->assertSame($readers, $after);
        // key1 still reads: with key2 gone a writer is still refused
        $this->assertTrue($store->exists($key1));
        $store->delete($key2);
        $this->assertConflict(fn () => $store->save($key3));
        $store->delete($key1);
        $store->save($key3);
        $this->assertTrue($store->exists($key3));
        $store->delete($key3);
    }

    public function testAWriterDemotedToReaderLetsOtherReadersIn(): void
    {
        $store = $this->store();
        $resource = $this->resource();
        [$key1, $key2, $key3] = [new Key($resource), new Key($resource), new Key($resource)];

        $store->save($key1);
        $store->saveRead($key1);
        $store->saveRead($key2);
        $this->assertTrue($store->exists($key1));
        $this->assertTrue($store->exists($key2));
        // key1 reads now: a writer waits for both
        $this->assertConflict(fn () => $store->save($key3));
        $store->delete($key2);
        $this->assertConflict(fn () => $store->save($key3));
        $store->delete($key1);
        $store->save($key3);
        $store->delete($key3);
    }

    public function testAReadLockIsPutOffLikeALock(): void
    {
        $store = $this->store(1, 5.0);
        $resource = $this->resource();
        $key = new Key($resource);
        [$r] = $this->redisNodes();

        $store->saveRead($key);
        $store->putOffExpiration($key, 60.0);
        // the set's expiry follows its longest read lock
        $this->assertGreaterThan(30000, $r->pttl($resource));
        // saved again as a reader: the initial TTL again (RedisStore's rule)
        $store->saveRead($key);
        $this->assertLessThanOrEqual(5000, $r->pttl($resource));
        $this->assertTrue($store->exists($key));
        $store->delete($key);
        $this->assertSame(0, $r->exists($resource));
    }

    private function assertConflict(callable $save): void
    {
        try {
            $save();
            $this->fail('saved against a lock that excludes it');
        } catch (LockConflictedException $e) {
            $this->addToAssertionCount(1);
        }
    }
}
