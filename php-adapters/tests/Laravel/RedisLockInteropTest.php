<?php
/*
 * During a rolling switch some workers still run Laravel's RedisLock, others
 * the distlock driver: on the same key they exclude each other, and an owner
 * taken by one is released by the other (the value is the owner, a plain
 * string key with an expiry, in both).
 */

declare(strict_types=1);

namespace Distlock\Tests\Laravel;

use Illuminate\Cache\RedisLock;
use Illuminate\Support\Facades\Cache;
use PHPUnit\Framework\TestCase;

require_once __DIR__ . '/fixtures/cache.php';
require_once __DIR__ . '/fixtures/PhpRedisConnection.php';

final class RedisLockInteropTest extends TestCase
{
    private PhpRedisConnection $redis;

    protected function setUp(): void
    {
        app();
        $this->redis = new PhpRedisConnection(distlock_test_servers(1));
    }

    /** Laravel's RedisLock on the key distlock's lock $name uses. */
    private function redisLock(string $name, int $seconds, ?string $owner = null): RedisLock
    {
        return new RedisLock($this->redis, Cache::getStore()->getPrefix() . $name, $seconds, $owner);
    }

    private static function name(): string
    {
        return 'interop-' . bin2hex(random_bytes(6));
    }

    public function testARedisLockExcludesDistlockAndDistlockReleasesItsOwner(): void
    {
        $name = self::name();
        $this->assertTrue($this->redisLock($name, 10, 'old-worker')->get());

        $this->assertFalse(Cache::lock($name, 10)->get());
        $this->assertFalse(Cache::lock($name, 10, 'new-worker')->release());
        $this->assertSame('old-worker', $this->redis->get(Cache::getStore()->getPrefix() . $name));
        $this->assertTrue(Cache::restoreLock($name, 'old-worker')->release());
        $this->assertTrue(Cache::lock($name, 10)->get());
    }

    public function testADistlockLockExcludesRedisLockWhichReleasesItsOwner(): void
    {
        $name = self::name();
        $this->assertTrue(Cache::lock($name, 10, 'new-worker')->get());

        $this->assertFalse($this->redisLock($name, 10)->get());
        $this->assertFalse($this->redisLock($name, 10, 'old-worker')->release());
        $this->assertTrue($this->redisLock($name, 10, 'new-worker')->release());
        $this->assertTrue($this->redisLock($name, 10)->get());
    }

    public function testBlockTakesTheLockARedisLockReleases(): void
    {
        // RedisLock's release publishes nothing: the waiter's re-check finds the key free.
        $name = self::name();
        $held = $this->redisLock($name, 30, 'old-worker');
        $this->assertTrue($held->get());
        $lock = Cache::lock($name, 10, 'new-worker');
        [$proc, $pipes] = start_child('redislock-release-when-waited', 'distlock', $name, 'old-worker');
        try {
            $this->assertTrue($lock->block(10));
        } finally {
            fclose($pipes[0]);
            $child = json_decode((string) stream_get_contents($pipes[1]), true);
            fclose($pipes[1]);
            proc_close($proc);
        }
        $this->assertSame(['waiter' => true, 'released' => true], $child);
        $this->assertSame('new-worker', $this->redis->get(Cache::getStore()->getPrefix() . $name));
    }
}
