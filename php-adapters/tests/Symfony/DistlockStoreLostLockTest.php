<?php
/*
 * A Key whose lock was lost (deleted behind its holder's back, or expired)
 * and that another owner now holds: BlockingStoreInterface::waitAndSave()
 * "waits until a key becomes free, then stores the resource", so a blocking
 * save of that Key waits for the other owner, as it does for a Key that
 * never held the resource; it does not throw LockConflictedException (which
 * symfony's Lock::acquire(true) passes on instead of waiting). The other
 * owner's lock here has a 1 s TTL: the wait ends when it runs out, observed
 * (the waiting call returns holding the resource), never assumed.
 */

declare(strict_types=1);

namespace Distlock\Tests\Symfony;

require_once __DIR__ . '/StoreTestCase.php';

use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;

final class DistlockStoreLostLockTest extends StoreTestCase
{
    /** The other owner's TTL, seconds: the blocking save gets the resource once it runs out. */
    private const OTHER_TTL = 1.0;

    /** Deletes $resource on every node (an operator's force-release) and lets another owner take it. */
    private function loseToAnotherOwner(string $resource, int $nodes): Key
    {
        foreach ($this->redisNodes($nodes) as $r) {
            $r->del($resource);
        }
        $other = new Key($resource);
        $this->store($nodes, self::OTHER_TTL)->save($other);

        return $other;
    }

    /** @dataProvider nodeCounts */
    public function testWaitAndSaveOfAKeyWhoseLockWasLostWaitsForTheNewOwner(int $nodes): void
    {
        $store = $this->store($nodes);
        $resource = $this->resource();
        $key = new Key($resource);
        $store->save($key);
        $other = $this->loseToAnotherOwner($resource, $nodes);

        try {
            $store->waitAndSave($key);
        } catch (LockConflictedException $e) {
            $this->fail('waitAndSave() did not wait for the other owner: ' . get_class($e) . ': ' . $e->getMessage());
        }
        $this->assertTrue($store->exists($key));
        // ours (the store's 300 s TTL) on a quorum, what a grant promises: the
        // other owner's key may outlive the quorum's on a node its save
        // reached last, and that node then refuses ours
        $ours = count(array_filter($this->redisNodes($nodes),
                                   fn (\Redis $r) => $r->pttl($resource) > self::OTHER_TTL * 1000));
        $this->assertGreaterThanOrEqual(intdiv($nodes, 2) + 1, $ours);
        $store->delete($key);
        unset($other);
    }

    /** @dataProvider nodeCounts */
    public function testWaitAndSaveReadOfAKeyWhoseReadLockWasLostWaitsForTheWriter(int $nodes): void
    {
        $store = $this->store($nodes);
        $resource = $this->resource();
        $key = new Key($resource);
        $store->saveRead($key);
        $other = $this->loseToAnotherOwner($resource, $nodes);   // a writer now

        try {
            $store->waitAndSaveRead($key);
        } catch (LockConflictedException $e) {
            $this->fail('waitAndSaveRead() did not wait for the writer: ' . get_class($e) . ': ' . $e->getMessage());
        }
        $this->assertTrue($store->exists($key));
        $this->assertGreaterThanOrEqual(intdiv($nodes, 2) + 1, $this->readLockNodes($resource, $nodes));
        $store->delete($key);
        unset($other);
    }

    /** The nodes where $resource holds read locks (a sorted set). */
    private function readLockNodes(string $resource, int $nodes): int
    {
        $n = 0;
        foreach ($this->redisNodes($nodes) as $r) {
            $n += $r->type($resource) === \Redis::REDIS_ZSET ? 1 : 0;
        }

        return $n;
    }

    /** @dataProvider nodeCounts */
    public function testABlockingAcquireOfALockThatWasLostWaitsForTheNewOwner(int $nodes): void
    {
        $factory = new LockFactory($this->store($nodes));
        $resource = $this->resource();
        $lock = $factory->createLock($resource, 30.0);
        $this->assertTrue($lock->acquire());
        $other = $this->loseToAnotherOwner($resource, $nodes);

        try {
            $this->assertTrue($lock->acquire(true));
        } catch (LockConflictedException $e) {
            $this->fail('Lock::acquire(true) did not wait for the other owner: ' . get_class($e) . ': ' . $e->getMessage());
        }
        $this->assertTrue($lock->isAcquired());
        $lock->release();
        unset($other);
    }
}
