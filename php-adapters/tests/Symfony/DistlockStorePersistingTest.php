<?php
/*
 * PersistingStoreInterface on distlock: save (a write lock), exists, delete,
 * a second Key of the same resource excluded, the Key's state, bad input and
 * unreachable servers as symfony's exceptions. On one node and a Redlock of
 * three: the store translates, the core decides the quorum.
 */

declare(strict_types=1);

namespace Distlock\Tests\Symfony;

require_once __DIR__ . '/StoreTestCase.php';

use Distlock\Client;
use Distlock\Symfony\DistlockStore;
use Symfony\Component\Lock\Exception\InvalidArgumentException;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Exception\UnserializableKeyException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\Store\RedisStore;

final class DistlockStorePersistingTest extends StoreTestCase
{
    /** @dataProvider nodeCounts */
    public function testSaveHoldsTheResourceUntilDelete(int $nodes): void
    {
        $store = $this->store($nodes);
        $resource = $this->resource();
        $key = new Key($resource);

        $this->assertFalse($store->exists($key));
        $store->save($key);
        $this->assertTrue($store->exists($key));
        // held in Redis on every node: our writer's string key
        $this->assertTrue($this->onEveryNode($nodes, fn (\Redis $r) => $r->type($resource) === \Redis::REDIS_STRING));
        $store->delete($key);
        $this->assertFalse($store->exists($key));
        $this->assertTrue($this->onEveryNode($nodes, fn (\Redis $r) => $r->exists($resource) === 0));
    }

    /** @dataProvider nodeCounts */
    public function testASecondKeyOfTheSameResourceIsExcludedUntilTheFirstIsDeleted(int $nodes): void
    {
        $store = $this->store($nodes);
        $resource = $this->resource();
        $key1 = new Key($resource);
        $key2 = new Key($resource);

        $store->save($key1);
        try {
            $store->save($key2);
            $this->fail('a second Key of a held resource was saved');
        } catch (LockConflictedException $e) {
            $this->assertStringContainsString($resource, $e->getMessage());
        }
        // the refusal left the first lock as it was
        $this->assertTrue($store->exists($key1));
        $this->assertFalse($store->exists($key2));
        // another store (another process's client) is excluded the same way
        $other = $this->store($nodes);
        $this->expectConflict(fn () => $other->save(new Key($resource)));

        $store->delete($key1);
        $store->save($key2);
        $this->assertFalse($store->exists($key1));
        $this->assertTrue($store->exists($key2));
        $store->delete($key2);
        $this->assertFalse($store->exists($key2));
    }

    public function testDifferentResourcesAreIndependent(): void
    {
        $store = $this->store();
        $key1 = new Key($this->resource());
        $key2 = new Key($this->resource());

        $store->save($key1);
        $this->assertFalse($store->exists($key2));
        $store->save($key2);
        $this->assertTrue($store->exists($key1));
        $this->assertTrue($store->exists($key2));
        // deleting a Key that holds nothing leaves the others alone
        $store->delete(new Key($this->resource()));
        $store->delete($key1);
        $this->assertFalse($store->exists($key1));
        $this->assertTrue($store->exists($key2));
        $store->delete($key2);
        $this->assertFalse($store->exists($key2));
    }

    public function testSavingTheSameKeyTwiceKeepsItAndResetsItsTtl(): void
    {
        $store = $this->store(1, 30.0);
        $resource = $this->resource();
        $key = new Key($resource);
        [$r] = $this->redisNodes();

        $store->save($key);
        $store->putOffExpiration($key, 2.0);
        $this->assertLessThanOrEqual(2000, $r->pttl($resource));
        // saved again: RedisStore's rule, the TTL is the initial TTL again
        $store->save($key);
        $this->assertTrue($store->exists($key));
        $this->assertGreaterThan(20000, $r->pttl($resource));
        $store->delete($key);
        $this->assertSame(0, $r->exists($resource));
    }

    public function testAKeyHoldingALockCannotBeSerialized(): void
    {
        $store = $this->store();
        $key = new Key($this->resource());
        serialize($key);   // a Key that holds nothing still travels
        $store->save($key);
        $this->assertTrue($store->exists($key));
        $this->expectException(UnserializableKeyException::class);
        serialize($key);
    }

    public function testAResourceHeldThroughRedisStoreExcludesOurKeysAndTheReverse(): void
    {
        // A deployment switching stores runs both for a while: each excludes the other.
        [$r] = $this->redisNodes();
        $theirs = new RedisStore($r);
        $ours = $this->store();

        $resource = $this->resource();
        $symfonyKey = new Key($resource);
        $theirs->save($symfonyKey);
        $this->expectConflict(fn () => $ours->save(new Key($resource)));
        $this->expectConflict(fn () => $ours->saveRead(new Key($resource)));
        $theirs->delete($symfonyKey);

        $resource = $this->resource();
        $ourKey = new Key($resource);
        $ours->save($ourKey);
        $this->expectConflict(fn () => $theirs->save(new Key($resource)));
        $this->expectConflict(fn () => $theirs->saveRead(new Key($resource)));
        $ours->delete($ourKey);
        $theirKey = new Key($resource);
        $theirs->save($theirKey);
        $this->assertTrue($theirs->exists($theirKey));
        $theirs->delete($theirKey);
    }

    public function testAnInvalidResourceIsAClearErrorNotACrash(): void
    {
        $store = $this->store();
        foreach (['' => 'empty', str_repeat('k', 1025) => 'too long'] as $resource => $why) {
            try {
                $store->save(new Key((string) $resource));
                $this->fail("a resource $why was saved");
            } catch (InvalidArgumentException $e) {
                $this->assertStringContainsString('cannot be taken', $e->getMessage());
                $this->assertInstanceOf(\ValueError::class, $e->getPrevious());
            }
        }
    }

    public function testANonPositiveInitialTtlIsRefused(): void
    {
        $this->expectException(InvalidTtlException::class);
        new DistlockStore(new Client(distlock_test_servers(1)), 0.0);
    }

    public function testUnreachableServersAreAStorageErrorWithoutThePassword(): void
    {
        // port 1: nothing listens there; the password must not reach the message
        $store = new DistlockStore(new Client('redis://:s3cret-pw@127.0.0.1:1', ['connect_timeout_ms' => 200]));
        try {
            $store->save(new Key($this->resource()));
            $this->fail('saved on a server that does not exist');
        } catch (LockStorageException $e) {
            $this->assertInstanceOf(\Distlock\ConnectionException::class, $e->getPrevious());
            $this->assertStringNotContainsString('s3cret-pw', $e->getMessage());
        }
    }

    public function testAStoreComesFromADsn(): void
    {
        $store = DistlockStore::fromDsn('distlock:' . distlock_test_servers(3), 30.0);
        $resource = $this->resource();
        $key = new Key($resource);
        $store->save($key);
        $this->assertTrue($store->exists($key));
        // the DSN's servers are the Redlock group: the key is on a quorum of
        // them (all a fresh client's grant promises: its round may end before
        // its last connection is ready), so not on the first server alone
        $on = array_sum(array_map(fn(\Redis $r) => $r->exists($resource), $this->redisNodes(3)));
        $this->assertGreaterThanOrEqual(2, $on);
        $store->delete($key);

        foreach ([distlock_test_servers(1), 'distlock:redis://:dsn-pw@127.0.0.1:99999', 'distlock:bogus://:dsn-pw@x'] as $dsn) {
            try {
                DistlockStore::fromDsn($dsn);
                $this->fail("a store from the DSN $dsn");
            } catch (InvalidArgumentException $e) {
                $this->assertStringNotContainsString('dsn-pw', $e->getMessage());
                $this->assertStringNotContainsString('dsn-pw', (string) $e);
            }
        }
    }

    private function expectConflict(callable $save): void
    {
        try {
            $save();
            $this->fail('saved a resource held by another owner');
        } catch (LockConflictedException $e) {
            $this->addToAssertionCount(1);
        }
    }
}
