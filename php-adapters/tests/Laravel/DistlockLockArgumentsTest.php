<?php
/*
 * Arguments Laravel's Cache::lock() and block() take: docs/laravel.md lists
 * where the distlock driver differs from Laravel's RedisLock (an owner of
 * 1..256 bytes without NUL, no expiry as a renewed lease); anything else
 * Laravel accepts must work the same.
 */

declare(strict_types=1);

namespace Distlock\Tests\Laravel;

use Illuminate\Support\Facades\Cache;
use PHPUnit\Framework\TestCase;

require_once __DIR__ . '/fixtures/cache.php';

final class DistlockLockArgumentsTest extends TestCase
{
    protected function setUp(): void
    {
        app();
    }

    private static function name(): string
    {
        return 'arguments-' . bin2hex(random_bytes(6));
    }

    private static function holder(string $name): array
    {
        $distlock = Cache::store('distlock')->getStore();

        return $distlock->getClient()->holder($distlock->getPrefix() . $name);
    }

    public function testALockOfThirtyDaysLivesThirtyDays(): void
    {
        // RedisLock: SET name owner EX 2592000 NX. A month-long lock (a
        // monthly report, a subscription period) is an ordinary $seconds.
        $name = self::name();
        $lock = Cache::lock($name, 86400 * 30, 'monthly');
        try {
            $this->assertTrue($lock->get());
            $this->assertGreaterThan(86400 * 29, self::holder($name)['ttl']);
        } finally {
            Cache::lock($name)->forceRelease();
        }
    }

    public function testBlockWithABudgetOfDaysTakesAFreeLockAtOnce(): void
    {
        // Laravel's block($seconds) waits up to $seconds: a long budget (a
        // day, PHP_INT_MAX as "as long as it takes") on a free lock takes it
        // at the first attempt.
        foreach ([86400 * 30, PHP_INT_MAX] as $budget) {
            $name = self::name();
            $lock = Cache::lock($name, 10, 'patient');
            $this->assertTrue($lock->block($budget), "block($budget) on a free lock");
            $this->assertTrue($lock->release());
        }
    }

    public function testANameOfMoreThanAKilobyteIsALockAsInLaravel(): void
    {
        // Laravel's keys are Redis keys: a lock named after a long URL or a
        // list of ids is taken, excluded and released like any other.
        $name = 'export:' . str_repeat('id,', 400);
        $a = Cache::lock($name, 10, 'owner-a');
        $this->assertTrue($a->get());
        $this->assertFalse(Cache::lock($name, 10, 'owner-b')->get());
        $this->assertTrue($a->release());
    }
}
