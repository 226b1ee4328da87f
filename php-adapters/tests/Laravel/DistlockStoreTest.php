<?php
/*
 * Distlock\Laravel\DistlockStore as a Laravel cache store: built on a
 * Distlock\Client directly, or from config/cache.php by the service
 * provider (keys' prefix, values kept by another store or refused).
 */

declare(strict_types=1);

namespace Distlock\Tests\Laravel;

use Distlock\Client;
use Distlock\Laravel\DistlockStore;
use Illuminate\Contracts\Cache\LockProvider;
use Illuminate\Support\Facades\Cache;
use PHPUnit\Framework\TestCase;

require_once __DIR__ . '/fixtures/cache.php';

final class DistlockStoreTest extends TestCase
{
    private static function name(): string
    {
        return 'store-' . bin2hex(random_bytes(6));
    }

    public function testAStoreOnAClientGivesAndRestoresLocks(): void
    {
        $client = new Client(distlock_test_servers(1));
        $store = new DistlockStore($client);
        $this->assertInstanceOf(LockProvider::class, $store);
        $name = self::name();

        $lock = $store->lock($name, 10, 'owner-a');
        $this->assertTrue($lock->get());
        $this->assertSame('owner-a', $client->holder($name)['token']);
        $this->assertFalse($store->lock($name, 10)->get());
        $this->assertTrue($store->restoreLock($name, 'owner-a')->release());
        $this->assertSame('free', $client->holder($name)['kind']);
    }

    public function testTheCachePrefixNamesTheKeyAsRedisStoreDoes(): void
    {
        app();
        $name = self::name();
        $this->assertTrue(Cache::lock($name, 10, 'owner-a')->get());

        $client = new Client(distlock_test_servers(1));
        $this->assertSame('owner-a', $client->holder(PREFIX . ':' . $name)['token']);
        $this->assertSame('free', $client->holder($name)['kind']);
        $this->assertSame(PREFIX . ':', Cache::getStore()->getPrefix());
        $this->assertTrue(Cache::restoreLock($name, 'owner-a')->release());
    }

    public function testValuesAreRefusedWithoutACacheStore(): void
    {
        app();
        foreach ([fn () => Cache::get('k'), fn () => Cache::put('k', 1, 10), fn () => Cache::forget('k')] as $call) {
            try {
                $call();
                $this->fail('a value method of a lock-only store did not throw');
            } catch (\BadMethodCallException $e) {
                $this->assertStringContainsString('distlock is a lock store only', $e->getMessage());
                $this->assertStringContainsString("'cache'", $e->getMessage());
            }
        }
    }

    public function testValuesGoToTheNamedCacheStore(): void
    {
        app();
        $store = Cache::store('with-values');
        $this->assertTrue($store->put('answer', 42, 60));
        $this->assertSame(42, $store->get('answer'));
        $this->assertSame(42, Cache::store('array')->get('answer'));
        $this->assertSame(43, $store->increment('answer'));
        $this->assertTrue($store->forget('answer'));
        $this->assertNull($store->get('answer'));

        $name = self::name();
        $this->assertTrue($store->lock($name, 10, 'owner-a')->get());
        $this->assertFalse($store->lock($name, 10)->get());
        $this->assertTrue($store->restoreLock($name, 'owner-a')->release());
    }

    public function testAStoreThatKeepsItsValuesInItselfIsRefused(): void
    {
        app();
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage("must name a store of another driver");
        Cache::store('values-in-itself');
    }
}
