<?php
/*
 * A Laravel lock outlives the process that took it, however that process
 * ends, and its owner releases it from any process: the promises of
 * docs/laravel.md ("A lock object dropped by PHP does not release its lock";
 * a lock without expiry "once it is gone (the request ended) the key
 * expires within `lease`"; release() keeps Laravel's meaning, a
 * compare-and-delete of the owner) checked where a request or a worker
 * ends abnormally: a fatal error, and a forked worker.
 */

declare(strict_types=1);

namespace Distlock\Tests\Laravel;

use Illuminate\Support\Facades\Cache;
use PHPUnit\Framework\TestCase;

require_once __DIR__ . '/fixtures/cache.php';

final class DistlockLockProcessEndTest extends TestCase
{
    protected function setUp(): void
    {
        app();
    }

    private static function name(): string
    {
        return 'process-end-' . bin2hex(random_bytes(6));
    }

    private static function holder(string $name): array
    {
        $distlock = Cache::store('distlock')->getStore();

        return $distlock->getClient()->holder($distlock->getPrefix() . $name);
    }

    /** child.php take-then-die: its first line, and its exit status. */
    private static function takeThenDie(string $name, string $owner, string $seconds, string $how): array
    {
        [$proc, $pipes] = start_child('take-then-die', 'distlock', $name, $owner, $seconds, $how);
        fclose($pipes[0]);
        $first = json_decode((string) fgets($pipes[1]), true);
        stream_get_contents($pipes[1]);
        fclose($pipes[1]);

        return [$first, proc_close($proc)];
    }

    public function testALockWithoutExpiryIsNotReleasedByAFatalErrorOfItsRequest(): void
    {
        // Laravel's RedisLock of 0 seconds is a key without TTL: a request
        // that dies of a fatal error (E_USER_ERROR, memory_limit,
        // max_execution_time) leaves it held. The distlock store promises a
        // lease of `lease` seconds (6 here) that expires once the object is
        // gone, never a release.
        foreach (['user-error', 'memory'] as $how) {
            $name = self::name();
            [$first, $status] = self::takeThenDie($name, "owner-$how", '0', $how);
            $this->assertSame(['got' => true], $first, "$how: the child took the lock");
            $this->assertSame(255, $status, "$how: the child died of a fatal error");

            $holder = self::holder($name);
            $this->assertSame("owner-$how", $holder['token'], "$how: still held by its owner after the fatal error");
            Cache::restoreLock($name, "owner-$how")->release();
        }
    }

    public function testALockWithExpiryIsNotReleasedByAFatalErrorOfItsRequest(): void
    {
        $name = self::name();
        [$first, $status] = self::takeThenDie($name, 'owner-expiring', '30', 'user-error');
        $this->assertSame(['got' => true], $first);
        $this->assertSame(255, $status);
        $this->assertSame('owner-expiring', self::holder($name)['token']);
        $this->assertTrue(Cache::restoreLock($name, 'owner-expiring')->release());
    }

    public function testAForkedChildReleasesTheLockItInheritedAsItsOwner(): void
    {
        // A worker that takes a lock and forks a child to run the job: the
        // child holds the same lock object, owner and all. Laravel's release()
        // is a compare-and-delete of the owner, in any process; with an
        // expiry it is so here, and without one it must be too.
        foreach (['30', '0'] as $seconds) {
            $name = self::name();
            $answer = run_child('take-fork-release', 'distlock', $name, "forked-$seconds", $seconds);
            $this->assertSame(['got' => true, 'child' => 'true'], $answer, "a lock of $seconds seconds");
            $this->assertSame('free', self::holder($name)['kind'], "a lock of $seconds seconds: released by the child");
        }
    }
}
