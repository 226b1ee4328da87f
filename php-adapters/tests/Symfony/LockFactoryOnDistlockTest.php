<?php
/*
 * symfony's LockFactory and Lock, unchanged, on DistlockStore: acquire,
 * isAcquired, refresh (the Lock's TTL in Redis), getRemainingLifetime,
 * release; a Lock destroyed with autoRelease releases, one created with
 * autoRelease false keeps the resource until its TTL.
 */

declare(strict_types=1);

namespace Distlock\Tests\Symfony;

require_once __DIR__ . '/StoreTestCase.php';

use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;

final class LockFactoryOnDistlockTest extends StoreTestCase
{
    /** @dataProvider nodeCounts */
    public function testALockFromTheFactoryIsHeldWithItsTtlUntilReleased(int $nodes): void
    {
        $factory = new LockFactory($this->store($nodes));
        $resource = $this->resource();
        $lock = $factory->createLock($resource, 30.0);

        $this->assertTrue($lock->acquire());
        $this->assertTrue($lock->isAcquired());
        // Lock::acquire() refreshed the store's initial TTL (300 s) to the Lock's own
        $left = $lock->getRemainingLifetime();
        $this->assertGreaterThan(0.0, $left);
        $this->assertLessThanOrEqual(30.0, $left);
        $this->assertTrue($this->onEveryNode($nodes, fn (\Redis $r) => $r->pttl($resource) <= 30000
                                                                   && $r->pttl($resource) > 20000));
        $other = (new LockFactory($this->store($nodes)))->createLock($resource, 30.0);
        $this->assertFalse($other->acquire());

        $lock->refresh(120.0);
        $this->assertTrue($this->onEveryNode($nodes, fn (\Redis $r) => $r->pttl($resource) > 60000));
        $lock->release();
        $this->assertFalse($lock->isAcquired());
        $this->assertTrue($this->onEveryNode($nodes, fn (\Redis $r) => $r->exists($resource) === 0));
        $this->assertTrue($other->acquire());
        $other->release();
    }

    public function testReadLocksFromTheFactoryShareAndExcludeAWriter(): void
    {
        $factory = new LockFactory($this->store());
        $resource = $this->resource();
        $r1 = $factory->createLock($resource, 30.0);
        $r2 = $factory->createLock($resource, 30.0);
        $w = $factory->createLock($resource, 30.0);

        $this->assertTrue($r1->acquireRead());
        $this->assertTrue($r2->acquireRead());
        $this->assertFalse($w->acquire());
        $r1->release();
        $this->assertFalse($w->acquire());
        $r2->release();
        $this->assertTrue($w->acquire());
        $this->assertFalse($r1->acquireRead());
        $w->release();
    }

    public function testADestroyedLockWithAutoReleaseFreesTheResource(): void
    {
        $factory = new LockFactory($this->store());
        $resource = $this->resource();
        [$r] = $this->redisNodes();
        $lock = $factory->createLock($resource, 30.0);
        $this->assertTrue($lock->acquire());
        unset($lock);
        $this->assertSame(0, $r->exists($resource));
        $again = $factory->createLock($resource, 30.0);
        $this->assertTrue($again->acquire());
        $again->release();
    }

    public function testADestroyedLockWithoutAutoReleaseKeepsTheResourceUntilItsTtl(): void
    {
        $factory = new LockFactory($this->store());
        $resource = $this->resource();
        [$r] = $this->redisNodes();
        $lock = $factory->createLock($resource, 30.0, false);
        $this->assertTrue($lock->acquire());
        // short enough to wait for its end, long enough for the checks below
        // to run inside it on a loaded machine
        $lock->refresh(3.0);
        unset($lock);
        gc_collect_cycles();

        // Still held in Redis, by its token: nobody else gets it ...
        $this->assertSame(\Redis::REDIS_STRING, $r->type($resource));
        $this->assertGreaterThan(0, $r->pttl($resource));
        $other = $factory->createLock($resource, 30.0);
        $this->assertFalse($other->acquire());
        // ... until its TTL ends it
        $this->assertTrue(self::waitFor(fn () => $other->acquire(), 15.0), 'the abandoned lock never expired');
        $other->release();
    }

    public function testAKeyCreatedForALockIsStillHeldAfterTheLockObjectGoes(): void
    {
        // createLockFromKey(): the Key outlives the Lock; with autoRelease false
        // the Key still holds the resource and a new Lock on it can release it.
        $factory = new LockFactory($this->store());
        $resource = $this->resource();
        $key = new Key($resource);
        $lock = $factory->createLockFromKey($key, 30.0, false);
        $this->assertTrue($lock->acquire());
        unset($lock);
        $again = $factory->createLockFromKey($key, 30.0, false);
        $this->assertTrue($again->isAcquired());
        $again->release();
        $other = $factory->createLock($resource, 30.0);
        $this->assertTrue($other->acquire());
        $other->release();
    }

    public function testAForkedChildsCopyOfTheLockLeavesTheParentsLockAlone(): void
    {
        // The child's copy of the Lock (autoRelease) is released and destroyed in
        // the child: the lock stays the parent's, and the child exits cleanly.
        $resource = $this->resource();
        $cmd = [PHP_BINARY, '-d', 'extension=' . getenv('DISTLOCK_TEST_PHP_SO'), '-d', 'display_errors=stderr',
                __DIR__ . '/fixtures/forked_child.php', distlock_test_servers(1), $resource];
        $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        $out = stream_get_contents($pipes[1]);
        $err = stream_get_contents($pipes[2]);
        $this->assertSame(0, proc_close($proc), $err);
        $this->assertSame('', $err);
        $this->assertSame(implode("\n", [
            'parent acquire: true',
            'child isAcquired: false',
            'child released its copy',
            'child exit: 0',
            'parent isAcquired: true',
            'other store: refused',
            'parent released: true',
        ]) . "\n", $out);
    }

    public function testABlockingAcquireOnAFreeResourceDoesNotWait(): void
    {
        $factory = new LockFactory($this->store());
        $lock = $factory->createLock($this->resource(), 30.0);
        $this->assertTrue($lock->acquire(true));
        $this->assertTrue($lock->isAcquired());
        $lock->release();
        $this->assertTrue($lock->acquireRead(true));
        $lock->release();
        $this->assertFalse($lock->isAcquired());
    }

    public function testUnreachableServersMakeAcquireThrowSymfonysAcquiringException(): void
    {
        $store = \Distlock\Symfony\DistlockStore::fromDsn('distlock:redis://127.0.0.1:1', 300.0, ['connect_timeout_ms' => 200]);
        $lock = (new LockFactory($store))->createLock($this->resource(), 30.0);
        try {
            $lock->acquire();
            $this->fail('acquired on a server that does not exist');
        } catch (LockAcquiringException $e) {
            $this->assertNotInstanceOf(LockConflictedException::class, $e);
        }
    }
}
