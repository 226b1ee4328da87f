<?php
/*
 * BlockingStoreInterface and BlockingSharedLockStoreInterface on distlock:
 * another process waits in waitAndSave() / waitAndSaveRead() (or a
 * LockFactory lock's acquire(true) / acquireRead(true), which call them) and
 * is woken by the release, long before the holder's TTL would end it; it does
 * not get the resource while it is held. The waiter is observed waiting
 * (subscribed to the resource's release channel), never assumed by a sleep.
 */

declare(strict_types=1);

namespace Distlock\Tests\Symfony;

require_once __DIR__ . '/StoreTestCase.php';

use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Key;

final class DistlockStoreBlockingTest extends StoreTestCase
{
    /** The holders' TTL: a waiter woken well before it was woken by the release. */
    private const HOLDER_TTL = 60.0;

    public static function writerWaits(): array
    {
        return [
            'waitAndSave, 1 node' => ['store-write', 1],
            'waitAndSave, 3 nodes' => ['store-write', 3],
            'Lock::acquire(true)' => ['lock-write', 1],
        ];
    }

    public static function readerWaits(): array
    {
        return [
            'waitAndSaveRead' => ['store-read', 1],
            'Lock::acquireRead(true)' => ['lock-read', 1],
        ];
    }

    /** @dataProvider writerWaits */
    public function testAWaitingWriterIsWokenByTheWritersRelease(string $mode, int $nodes): void
    {
        $store = $this->store($nodes, self::HOLDER_TTL);
        $resource = $this->resource();
        $held = new Key($resource);
        $store->save($held);

        $waiter = $this->startWaiter($resource, $mode, $nodes);
        $this->assertSame('waiting', $waiter->line());
        $this->assertTrue($this->waitUntilSomeoneWaitsOn($resource, $nodes), 'the waiter never waited on the release channel');
        $this->assertNull($waiter->line(0.0), 'the waiter got a held resource');
        $this->assertTrue($store->exists($held));

        $released = microtime(true);
        $store->delete($held);
        $this->assertSame('acquired', $waiter->line(self::HOLDER_TTL / 2));
        $this->assertLessThan(self::HOLDER_TTL / 2, microtime(true) - $released);
        // the waiter holds it now
        $this->assertConflictFor(fn () => $store->save(new Key($resource)));
        $this->assertSame(0, $waiter->releaseAndExit());
        $store->save($held);
        $store->delete($held);
    }

    /** @dataProvider readerWaits */
    public function testAWaitingReaderIsWokenByTheWritersRelease(string $mode, int $nodes): void
    {
        $store = $this->store($nodes, self::HOLDER_TTL);
        $resource = $this->resource();
        $held = new Key($resource);
        $store->save($held);

        $waiter = $this->startWaiter($resource, $mode, $nodes);
        $this->assertSame('waiting', $waiter->line());
        $this->assertTrue($this->waitUntilSomeoneWaitsOn($resource, $nodes), 'the waiter never waited on the release channel');
        $this->assertNull($waiter->line(0.0), 'the reader got a resource held by a writer');

        $released = microtime(true);
        $store->delete($held);
        $this->assertSame('acquired', $waiter->line(self::HOLDER_TTL / 2));
        $this->assertLessThan(self::HOLDER_TTL / 2, microtime(true) - $released);
        // it is a read lock: another reader shares it, a writer is refused
        $reader = new Key($resource);
        $store->saveRead($reader);
        $this->assertConflictFor(fn () => $store->save(new Key($resource)));
        $store->delete($reader);
        $this->assertSame(0, $waiter->releaseAndExit());
    }

    public function testAWaitingWriterIsWokenWhenTheLastReaderLeaves(): void
    {
        $store = $this->store(1, self::HOLDER_TTL);
        $resource = $this->resource();
        [$reader1, $reader2] = [new Key($resource), new Key($resource)];
        $store->saveRead($reader1);
        $store->saveRead($reader2);

        $waiter = $this->startWaiter($resource, 'store-write');
        $this->assertSame('waiting', $waiter->line());
        $this->assertTrue($this->waitUntilSomeoneWaitsOn($resource), 'the writer never waited on the release channel');
        $store->delete($reader1);
        // one reader left: the writer still waits (the reader's lock is intact)
        $this->assertTrue($store->exists($reader2));
        $this->assertNull($waiter->line(0.0), 'the writer got the resource beside a reader');

        $released = microtime(true);
        $store->delete($reader2);
        $this->assertSame('acquired', $waiter->line(self::HOLDER_TTL / 2));
        $this->assertLessThan(self::HOLDER_TTL / 2, microtime(true) - $released);
        $this->assertConflictFor(fn () => $store->saveRead(new Key($resource)));
        $this->assertSame(0, $waiter->releaseAndExit());
    }

    public function testWaitAndSaveOnAFreeResourceTakesItAtOnce(): void
    {
        $store = $this->store();
        $resource = $this->resource();
        $key = new Key($resource);
        $store->waitAndSave($key);
        $this->assertTrue($store->exists($key));
        $this->assertConflictFor(fn () => $store->save(new Key($resource)));
        $store->delete($key);

        $store->waitAndSaveRead($key);
        $store->waitAndSaveRead($other = new Key($resource));
        $this->assertTrue($store->exists($key));
        $this->assertTrue($store->exists($other));
        $store->delete($key);
        $store->delete($other);
    }

    private function assertConflictFor(callable $save): void
    {
        try {
            $save();
            $this->fail('saved a resource the waiter holds');
        } catch (LockConflictedException $e) {
            $this->addToAssertionCount(1);
        }
    }
}
