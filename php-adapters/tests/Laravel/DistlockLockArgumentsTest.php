<?php
/*
 * Arguments Laravel's Cache::lock() and block() take: docs/laravel.md lists
 * where the distlock driver differs from Laravel's RedisLock (an owner of
 * 1..256 bytes without NUL, a name of 1..1024 bytes, at most about 24.8 days
 * of $seconds, no expiry as a renewed lease, a block() budget beyond that as
 * no limit); anything else Laravel accepts must work the same.
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

    public function testALockLongerThanTheTtlMaximumIsRefusedNamingTheLimit(): void
    {
        // RedisLock takes SET name owner EX 2592000 NX; distlock's TTL
        // maximum is about 24.8 days and a lock is never shorter than asked:
        // Laravel's InvalidArgumentException naming the limit, nothing held.
        $name = self::name();
        $lock = Cache::lock($name, 86400 * 30, 'monthly');
        try {
            $lock->get();
            $this->fail('a 30-day lock was taken');
        } catch (\InvalidArgumentException $e) {
            $this->assertStringContainsString('2147483.647 seconds', $e->getMessage());
            $this->assertStringContainsString("$name]", $e->getMessage());
            $this->assertInstanceOf(\ValueError::class, $e->getPrevious());
        }
        $this->assertSame('free', self::holder($name)['kind']);
        // The same refusal where block() takes it.
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage('2147483.647 seconds');
        $lock->block(1);
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

    public function testBlockWithABudgetBeyondTheWaitMaximumWaitsWithoutLimit(): void
    {
        // The adapter's maximum is the extension's: a budget at it is taken
        // as a timeout, one just beyond it is refused there (and the adapter
        // passes no limit instead).
        $client = Cache::store('distlock')->getStore()->getClient();
        $name = Cache::store('distlock')->getStore()->getPrefix() . self::name();
        $client->lock($name, 10, \Distlock\Laravel\DistlockLock::WAIT_MAX_SECONDS)->release();
        try {
            $client->lock($name, 10, \Distlock\Laravel\DistlockLock::WAIT_MAX_SECONDS + 0.001);
            $this->fail('the extension took a timeout beyond the adapter\'s WAIT_MAX_SECONDS');
        } catch (\ValueError $e) {
            $this->assertStringContainsString('timeout', $e->getMessage());
        }
    }

    public function testANameOfMoreThanAKilobyteIsRefusedNamingTheKeyLimit(): void
    {
        // Laravel's keys are Redis keys of any length; distlock's keys are
        // 1..1024 bytes: Laravel's InvalidArgumentException naming the
        // limit, from every method that names the key.
        $name = 'export:' . str_repeat('id,', 400);
        $lock = Cache::lock($name, 10, 'owner-a');
        foreach ([
            'get' => fn () => $lock->get(),
            'block' => fn () => $lock->block(1),
            'release' => fn () => $lock->release(),
            'forceRelease' => fn () => $lock->forceRelease(),
            'isOwnedByCurrentProcess' => fn () => $lock->isOwnedByCurrentProcess(),
        ] as $method => $call) {
            try {
                $call();
                $this->fail("$method() took a name of " . strlen($name) . ' bytes');
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString('at most 1024 bytes', $e->getMessage(), $method);
            }
        }
    }
}
