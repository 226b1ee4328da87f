--TEST--
distlock OO: a pcntl signal handler (pcntl_async_signals) runs while lock(), semaphore() or lockMany() waits, and the wait goes on to its deadline and takes the lock; without async signals the wait goes on and the handler waits for pcntl_signal_dispatch(); a handler that throws or exit()s ends the wait with nothing held
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
// Re-checks 30 s apart: a wait that ends sooner was ended by the handler or
// by the release's message.
$opts = ['retry_min_ms' => 30000, 'retry_max_ms' => 30000];
$c = new Client($uri, $opts);
pcntl_async_signals(true);

final class StopWaiting extends Exception {}

/* A child takes the lease with $take and publishes its token, then, once
 * the parent waits on $channel (subscribed), sends it SIGUSR1 and releases
 * when the parent sets $state to "release" (10 s at most: exit 2 if it
 * never does, so a handler that did not run is seen). */
function holder(string $uri, array $opts, string $channel, string $state, callable $take): int
{
    $r = dl_test_phpredis();
    $parent = getmypid();
    $pid = pcntl_fork();
    if ($pid === 0) {
        $cc = new Client($uri, $opts);
        $rr = dl_test_phpredis();
        $held = $take($cc);
        $rr->set("$state-token", $held->token());
        $rr->set($state, 'held');
        dl_test_wait_for(fn() => ($rr->pubsub('numsub', [$channel])[$channel] ?? 0) >= 1, 10.0);
        posix_kill($parent, SIGUSR1);
        $asked = dl_test_wait_for(fn() => $rr->get($state) === 'release', 10.0);
        $rr->set($state, 'released');
        exit($held->release() ? ($asked ? 0 : 2) : 1);
    }
    dl_test_wait_for(fn() => $r->get($state) === 'held', 10.0);
    return $pid;
}

function child_exit(int $pid): int
{
    pcntl_waitpid($pid, $status);
    return pcntl_wexitstatus($status);
}

/* The handler runs while $wait waits, the key still held (it then asks the
 * holder to release), and the wait goes on to take the lease once released. */
function goes_on(string $name, Client $c, string $uri, array $opts, string $key, callable $take, callable $wait): void
{
    $r = dl_test_phpredis();
    $state = dl_test_key("$name-state");
    $pid = holder($uri, $opts, "distlock:$key", $state, $take);
    $ran = [];
    pcntl_signal(SIGUSR1, function () use (&$ran, $r, $state, $key) {
        $ran[] = $r->get($state) === 'held' ? 'while the key was held' : 'once it was released';
        $r->set($state, 'release');
    });
    $l = $wait();
    echo "$name: handler ran ", implode(', ', $ran), '; then took it: ',
         var_export($l->isHeld(), true), ', child exit ', child_exit($pid),
         ', released ', var_export($l->release(), true), "\n";
}

$k = dl_test_key('signal-lock');
goes_on('lock', $c, $uri, $opts, $k, fn($cc) => $cc->tryLock($k, 30), fn() => $c->lock($k, 30, 20.0));
$k = dl_test_key('signal-lock-forever');
goes_on('lock without timeout', $c, $uri, $opts, $k, fn($cc) => $cc->tryLock($k, 30), fn() => $c->lock($k, 30));
$k = dl_test_key('signal-sem');
goes_on('semaphore', $c, $uri, $opts, $k, fn($cc) => $cc->trySemaphore($k, 1, 30),
        fn() => $c->semaphore($k, 1, 30, 20.0));
$ks = [dl_test_key('signal-many-a'), dl_test_key('signal-many-b')];
goes_on('lockMany', $c, $uri, $opts, $ks[1], fn($cc) => $cc->tryLock($ks[1], 30),
        fn() => $c->lockMany($ks, 30, 20.0));

// The wait goes on to the same deadline, not a new one: a handler that
// runs past the 3 s budget leaves one last attempt, not 3 s more.
$k = dl_test_key('signal-deadline');
$state = dl_test_key('signal-deadline-state');
$pid = holder($uri, $opts, "distlock:$k", $state, fn($cc) => $cc->tryLock($k, 30));
$t0 = microtime(true);
pcntl_signal(SIGUSR1, function () use ($t0) {
    // polls the clock until the budget is spent (3.5 s after the start)
    dl_test_wait_for(fn() => microtime(true) - $t0 > 3.5, 10.0);
});
try {
    $c->lock($k, 30, 3.0);
    echo "deadline: took it\n";
} catch (Distlock\LockTimeoutException $e) {
    $el = microtime(true) - $t0;
    echo 'deadline: timed out after the handler, not a budget later: ', var_export($el < 6.0, true);
}
$r->set($state, 'release');
echo ', child exit ', child_exit($pid), "\n";

// Without pcntl_async_signals() PHP runs a handler only at the script's
// pcntl_signal_dispatch(): the wait goes on and takes the lock.
pcntl_async_signals(false);
$k = dl_test_key('signal-sync');
$state = dl_test_key('signal-sync-state');
$pid = holder($uri, $opts, "distlock:$k", $state, fn($cc) => $cc->tryLock($k, 30));
$ran = 0;
pcntl_signal(SIGUSR1, function () use (&$ran) { $ran++; });
$r->set($state, 'release');   // the holder releases once it has sent the signal
$l = $c->lock($k, 30, 20.0);
echo "synchronous: took it: ", var_export($l->isHeld(), true), ", handler runs: $ran, ";
pcntl_signal_dispatch();
echo "at pcntl_signal_dispatch(): $ran, child exit ", child_exit($pid), ', released ',
     var_export($l->release(), true), "\n";
pcntl_async_signals(true);

// A handler that throws ends lock() with its exception; nothing is held:
// the key stays the child's, and is free once the child releases it.
$k = dl_test_key('signal-throws');
$state = dl_test_key('signal-throws-state');
$pid = holder($uri, $opts, "distlock:$k", $state, fn($cc) => $cc->tryLock($k, 30));
pcntl_signal(SIGUSR1, function () { throw new StopWaiting('a job timeout'); });
try {
    $c->lock($k, 30, 20.0);
    echo "throws: took it\n";
} catch (Throwable $e) {
    echo 'throws: ', get_class($e), ' (', $e->getMessage(), '); the key is the child\'s: ',
         var_export($r->get($k) === $r->get("$state-token"), true);
}
$r->set($state, 'release');
echo ', child exit ', child_exit($pid), ', free after its release: ', var_export($r->exists($k) === 0, true), "\n";

// A handler that exit()s (Laravel's worker on SIGALRM) ends the process in
// lock() (waiting without limit): the key stays its holder's.
$k = dl_test_key('signal-exits');
$held = $c->tryLock($k, 30);
$pid = pcntl_fork();
if ($pid === 0) {
    pcntl_signal(SIGUSR1, function () { exit(3); });
    $cc = new Client($uri, $opts);
    $cc->lock($k, 30);
    exit(0);
}
$ch = "distlock:$k";
dl_test_wait_for(fn() => ($r->pubsub('numsub', [$ch])[$ch] ?? 0) >= 1, 10.0);
posix_kill($pid, SIGUSR1);
$exited = dl_test_wait_for(function () use ($pid, &$status) {
    return pcntl_waitpid($pid, $status, WNOHANG) === $pid;
}, 10.0);
if (!$exited) {
    posix_kill($pid, SIGKILL);
    pcntl_waitpid($pid, $status);
}
echo 'exits: waiter exit ', $exited ? pcntl_wexitstatus($status) : 'none (still waiting 10 s after the signal)', ', the key is the holder\'s: ',
     var_export($r->get($k) === $held->token(), true), ', released ', var_export($held->release(), true), "\n";
?>
--EXPECT--
lock: handler ran while the key was held; then took it: true, child exit 0, released true
lock without timeout: handler ran while the key was held; then took it: true, child exit 0, released true
semaphore: handler ran while the key was held; then took it: true, child exit 0, released true
lockMany: handler ran while the key was held; then took it: true, child exit 0, released true
deadline: timed out after the handler, not a budget later: true, child exit 0
synchronous: took it: true, handler runs: 0, at pcntl_signal_dispatch(): 1, child exit 0, released true
throws: StopWaiting (a job timeout); the key is the child's: true, child exit 0, free after its release: true
exits: waiter exit 3, the key is the holder's: true, released true
