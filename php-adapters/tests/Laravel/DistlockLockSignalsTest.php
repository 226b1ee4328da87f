<?php
/*
 * A Laravel queue worker handles signals with pcntl_async_signals(): SIGTERM
 * (stop after this job) and SIGALRM (the job's --timeout: the worker kills
 * itself). Laravel's block() sleeps 250 ms at a time, so such a handler runs
 * while a job waits for a lock; block() "keeps Laravel's meaning"
 * (docs/laravel.md), so a signal that arrives while block() waits must reach
 * its handler.
 */

declare(strict_types=1);

namespace Distlock\Tests\Laravel;

use Illuminate\Support\Facades\Cache;
use PHPUnit\Framework\TestCase;

require_once __DIR__ . '/fixtures/cache.php';

final class DistlockLockSignalsTest extends TestCase
{
    protected function setUp(): void
    {
        app();
    }

    public function testASignalThatArrivesWhileBlockWaitsReachesItsHandler(): void
    {
        $name = 'signals-' . bin2hex(random_bytes(6));
        $holder = Cache::lock($name, 30, 'holder');
        $this->assertTrue($holder->get());

        [$proc, $pipes] = start_child('block-with-signal-handler', 'distlock', $name, 'worker', '5');
        try {
            fclose($pipes[0]);
            // The worker is waiting once it listens for the key's release
            // (polled with a deadline): then the signal comes.
            $url = parse_url(distlock_test_servers(1));
            $redis = new \Redis();
            $redis->connect($url['host'], $url['port']);
            $channel = 'distlock:' . Cache::getStore()->getPrefix() . $name;
            $deadline = microtime(true) + 20.0;
            while (!($waiting = ($redis->pubsub('numsub', [$channel])[$channel] ?? 0) > 0)
                && microtime(true) < $deadline) {
                usleep(2000);
            }
            $this->assertTrue($waiting, 'the worker waits in block()');
            $this->assertTrue(proc_terminate($proc, SIGUSR1));
            $answer = json_decode((string) stream_get_contents($pipes[1]), true);
        } finally {
            fclose($pipes[1]);
            proc_close($proc);
            $holder->release();
        }

        $this->assertSame('timeout', $answer['outcome'], 'the lock stayed held: block() timed out');
        $this->assertTrue($answer['handled'], 'the SIGUSR1 handler ran');
    }

    /**
     * A job timeout that lands as block() is granted (a signal raised by a
     * handler, still pending when the wait wins) ends block() with the
     * handler's exception, as at any other moment of the wait: the lock is
     * not left held by a Lock nobody can reach.
     */
    public function testAHandlerThatThrowsAsBlockIsGrantedLeavesTheLockFree(): void
    {
        $name = 'signals-grant-' . bin2hex(random_bytes(6));
        $holder = Cache::lock($name, 30, 'holder');
        $this->assertTrue($holder->get());

        pcntl_async_signals(true);
        // The child's SIGHUP raises SIGUSR1, whose handler lets the holder
        // go and raises SIGUSR2: the job timeout, which throws.
        pcntl_signal(SIGHUP, function (): void {
            posix_kill(getmypid(), SIGUSR1);
        });
        pcntl_signal(SIGUSR1, function () use ($holder): void {
            $holder->release();
            posix_kill(getmypid(), SIGUSR2);
        });
        pcntl_signal(SIGUSR2, function (): void {
            throw new \RuntimeException('job timed out');
        });
        [$proc, $pipes] = start_child('signal-when-waited', 'distlock', $name, (string) getmypid());
        $outcome = null;
        try {
            fclose($pipes[0]);
            try {
                Cache::lock($name, 30, 'worker')->block(10);
                $outcome = 'took it';
            } catch (\RuntimeException $e) {
                $outcome = $e->getMessage();
            }
            $child = json_decode((string) stream_get_contents($pipes[1]), true);
        } finally {
            fclose($pipes[1]);
            proc_close($proc);
            pcntl_signal(SIGHUP, SIG_DFL);
            pcntl_signal(SIGUSR1, SIG_DFL);
            pcntl_signal(SIGUSR2, SIG_DFL);
            pcntl_async_signals(false);
        }

        $this->assertTrue($child['signalled'], 'the child saw block() wait and signalled it');
        $this->assertSame('job timed out', $outcome);
        $other = Cache::lock($name, 30, 'other');
        $this->assertTrue($other->get(), 'the key is free once block() threw: nothing held');
        $other->release();
    }
}
