--TEST--
distlock OO: lock() waits for a release (by another process) or an expiry, and gives up after its timeout
--EXTENSIONS--
distlock
redis
pcntl
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
$uri = dl_test_uri();
$r = dl_test_phpredis();
$c = new Distlock\Client($uri);

// Held by a foreign owner (the seed's SET NX) for 60 s: lock() gives up after its timeout.
$k = dl_test_key('wait-timeout');
$r->set($k, 'seed-owner', ['NX', 'EX' => 60]);
$t0 = microtime(true);
try { $c->lock($k, 10, 0.3); echo "got it\n"; }
catch (Distlock\LockTimeoutException $e) {
    $el = microtime(true) - $t0;
    echo get_class($e), ' ', $e->getCode(), "\n";
    var_dump($el >= 0.25 && $el < 2.0);
}
var_dump($r->get($k));

// A foreign lock that simply expires (no notification) is picked up.
$k = dl_test_key('wait-expiry');
$r->set($k, 'seed-owner', ['NX', 'PX' => 300]);
$t0 = microtime(true);
$l = $c->lock($k, 10, 5.0);
$el = microtime(true) - $t0;
var_dump($el >= 0.2 && $el < 2.0, $r->get($k) === $l->token());
var_dump($l->release());

// Another process holds the lock; we wait and get it once it releases.
$k = dl_test_key('wait-release');
$ready = dl_test_key('wait-ready');
$pid = pcntl_fork();
if ($pid === 0) {
    $cc = new Distlock\Client($uri);
    $rr = dl_test_phpredis();
    $held = $cc->tryLock($k, 30);
    $rr->set($ready, '1');
    // Hold until the parent is waiting on the key (it has subscribed to the
    // key's release channel), then mark and release.
    $ch = "distlock:$k";
    dl_test_wait_for(fn() => $rr->get($ready) === 'waiting'
        && ($rr->pubsub('numsub', [$ch])[$ch] ?? 0) >= 1, 10.0);
    $rr->set($ready, 'released');
    exit($held->release() ? 0 : 1);
}
var_dump(dl_test_wait_for(fn() => $r->get($ready) === '1', 10.0));
try { $c->lock($k, 10, 0); echo "got it while held\n"; }
catch (Distlock\LockTimeoutException $e) { echo "held by the child\n"; }
$r->set($ready, 'waiting');
$t0 = microtime(true);
$l = $c->lock($k, 10, 10.0);
$el = microtime(true) - $t0;
var_dump($r->get($ready));          // we got it only after the child released
var_dump($el < 2.0);                // woken promptly, not at the end of the budget
pcntl_waitpid($pid, $status);
echo 'child exit: ', pcntl_wexitstatus($status), "\n";
var_dump($l->release());
?>
--EXPECT--
Distlock\LockTimeoutException 500002
bool(true)
string(10) "seed-owner"
bool(true)
bool(true)
bool(true)
bool(true)
held by the child
string(8) "released"
bool(true)
child exit: 0
bool(true)
