--TEST--
distlock OO: a waiting semaphore(), writer lock() and lockMany() are woken by another process's release (no polling: the re-check interval is 30 s here)
--EXTENSIONS--
distlock
redis
pcntl
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
require __DIR__ . '/fixtures/common.inc';
$uri = dl_test_uri();
$r = dl_test_phpredis();
// A waiter re-checks every retry_max_ms at the latest: 30 s here, so a wait
// that ends within 2 s was ended by the release's message, not a re-check.
$opts = ['retry_min_ms' => 30000, 'retry_max_ms' => 30000];
$c = new Client($uri, $opts);

/* A child process takes the lease with $take, then releases it once the
 * parent waits on $channel (subscribed); the parent waits with $wait. */
function handover(string $name, string $uri, array $opts, string $channel, callable $take, callable $wait): void
{
    $r = dl_test_phpredis();
    $state = dl_test_key("$name-state");
    $pid = pcntl_fork();
    if ($pid === 0) {
        $cc = new Client($uri, $opts);
        $rr = dl_test_phpredis();
        $held = $take($cc);
        $rr->set($state, 'held');
        dl_test_wait_for(fn() => ($rr->pubsub('numsub', [$channel])[$channel] ?? 0) >= 1, 10.0);
        $rr->set($state, 'released');
        exit($held->release() ? 0 : 1);
    }
    dl_test_wait_for(fn() => $r->get($state) === 'held', 10.0);
    $t0 = microtime(true);
    $l = $wait();
    $el = microtime(true) - $t0;
    echo "$name: ", $r->get($state), ', woken within 2 s: ', var_export($el < 2.0, true);
    pcntl_waitpid($pid, $status);
    echo ', child exit ', pcntl_wexitstatus($status), ', released ', var_export($l->release(), true), "\n";
}

$k = dl_test_key('wake-sem');
handover('semaphore', $uri, $opts, "distlock:$k",
         fn($cc) => $cc->trySemaphore($k, 1, 30),
         fn() => $c->semaphore($k, 1, 30, 20.0));

$k = dl_test_key('wake-reader');
handover('writer behind a reader', $uri, $opts, "distlock:$k",
         fn($cc) => $cc->tryLock($k, 30, Client::SHARED),
         fn() => $c->lock($k, 30, 20.0));

$k = dl_test_key('wake-writer');
handover('reader behind a writer', $uri, $opts, "distlock:$k",
         fn($cc) => $cc->tryLock($k, 30),
         fn() => $c->lock($k, 30, 20.0, Client::SHARED));

$ks = [dl_test_key('wake-many-a'), dl_test_key('wake-many-b'), dl_test_key('wake-many-c')];
handover('lockMany', $uri, $opts, "distlock:$ks[1]",
         fn($cc) => $cc->tryLock($ks[1], 30),
         fn() => $c->lockMany($ks, 30, 20.0));
?>
--EXPECT--
semaphore: released, woken within 2 s: true, child exit 0, released true
writer behind a reader: released, woken within 2 s: true, child exit 0, released true
reader behind a writer: released, woken within 2 s: true, child exit 0, released true
lockMany: released, woken within 2 s: true, child exit 0, released true
