<?php
/*
 * Cache::lock() and Cache::restoreLock() on the 'distlock' driver, called
 * the way a Laravel application calls them: the Cache facade over
 * CacheManager, the store registered by DistlockServiceProvider from
 * config/cache.php (fixtures/cache.php), against real redis-servers.
 */

declare(strict_types=1);

namespace Distlock\Tests\Laravel;

use Distlock\Laravel\DistlockLock;
use Illuminate\Contracts\Cache\LockTimeoutException;
use Illuminate\Support\Facades\Cache;
use PHPUnit\Framework\TestCase;

require_once __DIR__ . '/fixtures/cache.php';

final class DistlockLockTest extends TestCase
{
    protected function setUp(): void
    {
        app();
    }

    private static function name(): string
    {
        return 'orders-' . bin2hex(random_bytes(6));
    }

    /** The library's verdict on the key of lock $name of $store. */
    private static function holder(string $name, ?string $store = null): array
    {
        $distlock = Cache::store($store)->getStore();

        return $distlock->getClient()->holder($distlock->getPrefix() . $name);
    }

    public function testCacheLockIsADistlockLock(): void
    {
        $this->assertInstanceOf(DistlockLock::class, Cache::lock(self::name(), 10));
    }

    public function testTwoOwnersExcludeEachOther(): void
    {
        $name = self::name();
        $a = Cache::lock($name, 10, 'owner-a');
        $b = Cache::lock($name, 10, 'owner-b');

        $this->assertTrue($a->get());
        $this->assertFalse($b->get());
        $this->assertTrue($a->release());
        $this->assertTrue($b->get());
        $this->assertFalse($a->get());
        $this->assertTrue($b->release());
    }

    public function testTwoOwnersExcludeEachOtherOnThreeNodes(): void
    {
        $name = self::name();
        // Connect every node first: the verdict below counts all three.
        distlock_test_connect_every_node(Cache::store('redlock')->getStore()->getClient(), 3);
        $a = Cache::store('redlock')->lock($name, 10, 'owner-a');
        $b = Cache::store('redlock')->lock($name, 10, 'owner-b');

        $this->assertTrue($a->get());
        $this->assertFalse($b->get());
        $holder = self::holder($name, 'redlock');
        $this->assertSame([true, 'owner-a', 3], [$holder['held'], $holder['token'], $holder['nodes']]);
        $this->assertTrue($a->release());
        $this->assertTrue($b->get());
        $this->assertTrue($b->release());
    }

    public function testTheOwnerOfAHeldLockDoesNotTakeItAgain(): void
    {
        // Laravel's RedisLock takes a lock with SET NX: held is held, whoever asks.
        $name = self::name();
        $this->assertTrue(Cache::lock($name, 10, 'owner-a')->get());
        $this->assertFalse(Cache::lock($name, 10, 'owner-a')->get());
        $this->assertTrue(Cache::restoreLock($name, 'owner-a')->release());
    }

    public function testOwnerIsTheTokenTheKeyHolds(): void
    {
        $name = self::name();
        $lock = Cache::lock($name, 10, 'job-42');
        $this->assertSame('job-42', $lock->owner());
        $this->assertTrue($lock->get());
        $this->assertSame('job-42', self::holder($name)['token']);

        $random = Cache::lock(self::name(), 10);
        $this->assertIsString($random->owner());
        $this->assertNotSame('', $random->owner());
    }

    public function testAnExpiringLockLivesItsSecondsOnTheServers(): void
    {
        $name = self::name();
        $this->assertTrue(Cache::lock($name, 10, 'owner-a')->get());
        $ttl = self::holder($name)['ttl'];
        $this->assertGreaterThan(5.0, $ttl);
        $this->assertLessThanOrEqual(10.0, $ttl);
    }

    public function testGetWithACallbackRunsItAndReleases(): void
    {
        $name = self::name();
        $seen = null;
        $result = Cache::lock($name, 10)->get(function () use ($name, &$seen) {
            $seen = self::holder($name)['held'];

            return 'done';
        });

        $this->assertSame('done', $result);
        $this->assertTrue($seen);
        $this->assertSame('free', self::holder($name)['kind']);
    }

    public function testGetWithACallbackDoesNotRunItWhileHeld(): void
    {
        $name = self::name();
        $this->assertTrue(Cache::lock($name, 10, 'owner-a')->get());
        $ran = false;
        $result = Cache::lock($name, 10, 'owner-b')->get(function () use (&$ran) {
            $ran = true;
        });

        $this->assertFalse($result);
        $this->assertFalse($ran);
        $this->assertSame('owner-a', self::holder($name)['token']);
    }

    public function testReleaseReturnsTrueOnceAndFreesTheKey(): void
    {
        $name = self::name();
        $lock = Cache::lock($name, 10);
        $this->assertTrue($lock->get());
        $this->assertTrue($lock->release());
        $this->assertSame('free', self::holder($name)['kind']);
        $this->assertFalse($lock->release());
    }

    public function testAStrangersReleaseNeverDeletes(): void
    {
        $name = self::name();
        $this->assertTrue(Cache::lock($name, 10, 'owner-a')->get());

        $this->assertFalse(Cache::lock($name, 10, 'owner-b')->release());
        $this->assertFalse(Cache::lock($name, 10)->release());
        $this->assertFalse(Cache::restoreLock($name, 'owner-b')->release());
        $holder = self::holder($name);
        $this->assertTrue($holder['held']);
        $this->assertSame('owner-a', $holder['token']);
    }

    public function testForceReleaseDeletesWhoeverHoldsIt(): void
    {
        $name = self::name();
        $a = Cache::lock($name, 10, 'owner-a');
        $this->assertTrue($a->get());

        Cache::lock($name, 10, 'owner-b')->forceRelease();
        $this->assertSame('free', self::holder($name)['kind']);
        $this->assertFalse($a->release());
        $this->assertTrue(Cache::lock($name, 10, 'owner-b')->get());
    }

    public function testForceReleaseOnThreeNodes(): void
    {
        $name = self::name();
        $this->assertTrue(Cache::store('redlock')->lock($name, 10, 'owner-a')->get());
        Cache::store('redlock')->lock($name)->forceRelease();
        $holder = self::holder($name, 'redlock');
        $this->assertSame(['free', 0, 3], [$holder['kind'], $holder['taken'], $holder['answered']]);
    }

    public function testALockOutlivesItsObject(): void
    {
        // Laravel's lock is a key with an expiry: dropping the PHP object
        // (the end of a request) neither releases it nor shortens it.
        $name = self::name();
        $owner = (function () use ($name): string {
            $lock = Cache::lock($name, 10);
            $this->assertTrue($lock->get());

            return $lock->owner();
        })();
        gc_collect_cycles();

        $holder = self::holder($name);
        $this->assertTrue($holder['held']);
        $this->assertSame($owner, $holder['token']);
        $this->assertTrue(Cache::restoreLock($name, $owner)->release());
    }

    public function testRestoreLockInAnotherProcessReleases(): void
    {
        $name = self::name();
        $lock = Cache::lock($name, 30);
        $this->assertTrue($lock->get());

        $this->assertSame(['released' => true], run_child('restore-release', 'distlock', $name, $lock->owner()));
        $this->assertSame('free', self::holder($name)['kind']);
        $this->assertFalse($lock->release());
    }

    public function testALockTakenByAnotherProcessOutlivesItAndIsRestoredHere(): void
    {
        $name = self::name();
        $this->assertSame(['got' => true], run_child('take', 'redlock', $name, 'queued-job-7', '30'));

        $this->assertSame('queued-job-7', self::holder($name, 'redlock')['token']);
        $this->assertFalse(Cache::store('redlock')->lock($name, 30)->get());
        $restored = Cache::store('redlock')->restoreLock($name, 'queued-job-7');
        $this->assertSame('queued-job-7', $restored->owner());
        $this->assertTrue($restored->release());
        $this->assertSame('free', self::holder($name, 'redlock')['kind']);
    }

    public function testBlockIsWokenByTheReleaseNotByPolling(): void
    {
        // The waiter's store re-checks only every 10 s and its budget is 8 s:
        // only the release's notification can hand it the lock in time.
        $name = self::name();
        [$proc, $pipes] = start_child('hold-until-waited', 'slow-recheck', $name, 'holder');
        try {
            $this->assertSame("held\n", fgets($pipes[1]));
            $lock = Cache::store('slow-recheck')->lock($name, 10, 'waiter')->betweenBlockedAttemptsSleepFor(10000);
            $this->assertTrue($lock->block(8));
            $woken = microtime(true);
            $child = json_decode((string) stream_get_contents($pipes[1]), true);
        } finally {
            fclose($pipes[0]);
            fclose($pipes[1]);
            proc_close($proc);
        }

        $this->assertTrue($child['waiter'], 'the child saw the waiter subscribe');
        $this->assertTrue($child['released']);
        // Under load a wake-up may lag; a re-check could not come before 10 s.
        $this->assertLessThan(5.0, $woken - $child['at'], 'woken within 5 s of the release (re-check: 10 s)');
        $this->assertSame('waiter', self::holder($name, 'slow-recheck')['token']);
        $this->assertTrue($lock->release());
    }

    public function testBlockThrowsLockTimeoutExceptionWhileHeld(): void
    {
        $name = self::name();
        $this->assertTrue(Cache::lock($name, 10, 'owner-a')->get());
        $ran = false;
        try {
            Cache::lock($name, 10, 'owner-b')->block(0.2, function () use (&$ran) {
                $ran = true;
            });
            $this->fail('block() returned while another owner held the lock');
        } catch (LockTimeoutException $e) {
            $this->assertInstanceOf(\Distlock\LockTimeoutException::class, $e->getPrevious());
        }
        $this->assertFalse($ran);
        $this->assertSame('owner-a', self::holder($name)['token']);
        // As Laravel's: one attempt for a budget of 0 or less, then the timeout.
        foreach ([0, -1] as $seconds) {
            try {
                Cache::lock($name, 10, 'owner-b')->block($seconds);
                $this->fail("block($seconds) returned while another owner held the lock");
            } catch (LockTimeoutException $e) {
                $this->assertInstanceOf(\Distlock\LockTimeoutException::class, $e->getPrevious());
            }
        }
        $this->assertTrue(Cache::lock(self::name(), 10)->block(-1));
    }

    public function testBlockWithACallbackRunsItAndReleases(): void
    {
        $name = self::name();
        $result = Cache::lock($name, 10, 'owner-a')->block(5, function () use ($name) {
            return self::holder($name)['token'];
        });

        $this->assertSame('owner-a', $result);
        $this->assertSame('free', self::holder($name)['kind']);
    }

    public function testALockWithoutExpiryIsRenewedWhileItsObjectLivesThenExpires(): void
    {
        // The 'distlock' store's lease is 6 s: renewed every 2 s while held,
        // so at least 4 s are left when its object goes.
        $name = self::name();
        $lock = Cache::lock($name, 0, 'forever');
        $this->assertTrue($lock->get());

        // Renewed: its TTL, having run down, is back up (by the 2 s it ran down).
        $lowest = self::holder($name)['ttl'];
        $deadline = microtime(true) + 10.0;
        do {
            $holder = self::holder($name);
            $this->assertSame('forever', $holder['token']);
            $lowest = min($lowest, $holder['ttl']);
            $renewed = $holder['ttl'] > $lowest + 0.5;
        } while (!$renewed && microtime(true) < $deadline && self::pause());
        $this->assertTrue($renewed, "renewed within 10 s (TTL down to $lowest s)");

        unset($lock);
        $this->assertSame('forever', self::holder($name)['token'], 'still held once its object is gone');
        $deadline = microtime(true) + 15.0;
        while (self::holder($name)['kind'] !== 'free' && microtime(true) < $deadline) {
            self::pause();
        }
        $this->assertSame('free', self::holder($name)['kind'], 'expired within 15 s of its object');
    }

    public function testALockWithoutExpiryIsRenewedWhileItsObjectLivesThoughAClonesIsGone(): void
    {
        // A clone is another object of the same owner (as a clone of
        // Laravel's RedisLock is): its end is not the original's, whose
        // lease (6 s, renewed every 2 s) must go on being renewed.
        $name = self::name();
        $lock = Cache::lock($name, 0, 'original');
        $this->assertTrue($lock->get());
        $clone = clone $lock;
        unset($clone);

        $lowest = self::holder($name)['ttl'];
        $deadline = microtime(true) + 10.0;
        do {
            $holder = self::holder($name);
            $this->assertSame('original', $holder['token'], 'held by the original while it lives');
            $lowest = min($lowest, $holder['ttl']);
            $renewed = $holder['ttl'] > $lowest + 0.5;
        } while (!$renewed && microtime(true) < $deadline && self::pause());
        $this->assertTrue($renewed, "renewed within 10 s of the clone's end (TTL down to $lowest s)");
        $this->assertTrue($lock->release());
    }

    public function testACloneOfALockWithoutExpiryReleasesItByItsOwner(): void
    {
        $name = self::name();
        $lock = Cache::lock($name, 0, 'original');
        $this->assertTrue($lock->get());
        $this->assertTrue((clone $lock)->release());
        $this->assertSame('free', self::holder($name)['kind']);
        $this->assertFalse($lock->release());
    }

    public function testIsOwnedByCurrentProcessAsksTheServers(): void
    {
        $name = self::name();
        $a = Cache::lock($name, 10, 'owner-a');
        $this->assertFalse($a->isOwnedByCurrentProcess());
        $this->assertTrue($a->get());
        $this->assertTrue($a->isOwnedByCurrentProcess());
        $this->assertTrue(Cache::restoreLock($name, 'owner-a')->isOwnedByCurrentProcess());
        $this->assertFalse(Cache::lock($name, 10, 'owner-b')->isOwnedByCurrentProcess());
    }

    public function testAnEmptyNameOrAnOversizedOwnerIsAClearError(): void
    {
        $store = new \Distlock\Laravel\DistlockStore(Cache::getStore()->getClient());
        try {
            $store->lock('', 10)->get();
            $this->fail('an empty key was accepted');
        } catch (\InvalidArgumentException $e) {
            $this->assertStringContainsString('key', $e->getMessage());
        }
        try {
            Cache::lock(self::name(), 10, str_repeat('o', 300))->get();
            $this->fail('a 300-byte owner was accepted');
        } catch (\InvalidArgumentException $e) {
            $this->assertStringContainsString('token', $e->getMessage());
        }
    }

    /** Between two reads of a state polled with a deadline. */
    private static function pause(): bool
    {
        usleep(20000);

        return true;
    }
}
