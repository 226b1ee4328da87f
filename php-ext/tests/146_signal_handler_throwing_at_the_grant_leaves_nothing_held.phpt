--TEST--
distlock OO: a pcntl signal handler that throws as the wait is granted (a signal raised by a handler, still pending when lock(), semaphore() or lockMany() wins) ends the call with nothing held: no Lock is kept alive, unreachable, until the request ends
--EXTENSIONS--
distlock
redis
pcntl
posix
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
require __DIR__ . '/fixtures/common.inc';
$uri = dl_test_uri();
$r = dl_test_phpredis();
// Re-checks 30 s apart: only the holder's release (in the first handler)
// lets the wait take the key.
$opts = ['retry_min_ms' => 30000, 'retry_max_ms' => 30000];
$c = new Client($uri, $opts);
pcntl_async_signals(true);

final class JobTimedOut extends Exception {}

/* $held holds $key (this process). A child sends SIGHUP once the wait is
 * subscribed to the key's channel; its handler raises SIGUSR1, whose handler
 * releases $held and raises SIGUSR2 (a queue worker's job timeout landing at
 * that moment), whose handler throws. The wait then finds the key free and
 * takes it with SIGUSR2 still pending: the call must end with SIGUSR2's
 * exception and hold nothing. */
function throws_at_grant(string $name, Client $c, string $key, ?Distlock\Lock $held, callable $wait): void
{
    $r = dl_test_phpredis();
    $parent = getmypid();
    $pid = pcntl_fork();
    if ($pid === 0) {
        $rr = dl_test_phpredis();
        $ch = "distlock:$key";
        $seen = dl_test_wait_for(fn() => ($rr->pubsub('numsub', [$ch])[$ch] ?? 0) >= 1, 10.0);
        posix_kill($parent, SIGHUP);
        exit($seen ? 0 : 2);
    }
    pcntl_signal(SIGHUP, function () { posix_kill(getmypid(), SIGUSR1); });
    pcntl_signal(SIGUSR1, function () use (&$held) {
        $held->release();
        $held = null;
        posix_kill(getmypid(), SIGUSR2);
    });
    pcntl_signal(SIGUSR2, function () { throw new JobTimedOut('job timed out'); });
    try {
        $l = $wait();
        echo "$name: took it, held ", var_export($l->isHeld(), true);
        $l->release();
    } catch (JobTimedOut $e) {
        echo "$name: threw ", get_class($e);
    }
    pcntl_waitpid($pid, $status);
    pcntl_signal(SIGHUP, SIG_DFL);
    pcntl_signal(SIGUSR1, SIG_DFL);
    pcntl_signal(SIGUSR2, SIG_DFL);
    echo ', child exit ', pcntl_wexitstatus($status), ', key left held: ',
         var_export($r->exists($key) === 1, true), "\n";
}

$k = dl_test_key('grant-throw-lock');
throws_at_grant('lock', $c, $k, $c->tryLock($k, 30), fn() => $c->lock($k, 30, 20.0));
$k = dl_test_key('grant-throw-sem');
throws_at_grant('semaphore', $c, $k, $c->trySemaphore($k, 1, 30), fn() => $c->semaphore($k, 1, 30, 20.0));
$ks = [dl_test_key('grant-throw-many-a'), dl_test_key('grant-throw-many-b')];
throws_at_grant('lockMany', $c, $ks[1], $c->tryLock($ks[1], 30), function () use ($c, $ks, $r) {
    try {
        return $c->lockMany($ks, 30, 20.0);
    } finally {
        echo 'lockMany: first key left held: ', var_export($r->exists($ks[0]) === 1, true), '; ';
    }
});
?>
--EXPECT--
lock: threw JobTimedOut, child exit 0, key left held: false
semaphore: threw JobTimedOut, child exit 0, key left held: false
lockMany: first key left held: false; lockMany: threw JobTimedOut, child exit 0, key left held: false
