--TEST--
distlock OO: AUTO_RENEW keeps a short lease alive while the Lock lives; without it the key expires
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
require __DIR__ . '/fixtures/common.inc';
$r = dl_test_phpredis();
$c = new Client(dl_test_uri());

$k = dl_test_key('renew');
$l = $c->tryLock($k, 0.3, Client::AUTO_RENEW);
$plain = $c->tryLock(dl_test_key('no-renew'), 0.3);
// Let 1 s pass (more than three TTLs) -- the passing of time is what is tested here.
$end = microtime(true) + 1.0;
$alive = true;
while (microtime(true) < $end) {
    $alive = $alive && ($r->get($k) === $l->token());
    usleep(20000);
}
var_dump($alive, $l->isHeld(), $l->isLost(), $l->validity() > 0);
var_dump($r->exists(dl_test_key('no-renew')), $plain->isHeld());
var_dump($l->release(), $r->exists($k));

// Someone deletes the key under an auto-renewed lock: the renewal notices and the
// owner is told (isLost), extend() throws, release() reports it was not ours any more.
$k = dl_test_key('renew-lost');
$l = $c->tryLock($k, 0.3, Client::AUTO_RENEW);
$r->del($k);
var_dump(dl_test_wait_for(fn() => $l->isLost(), 3.0));
var_dump($l->isHeld(), $l->validity());
try { $l->extend(); echo "extended\n"; } catch (Distlock\LockLostException $e) { echo get_class($e), "\n"; }
var_dump($l->release());
?>
--EXPECT--
bool(true)
bool(true)
bool(false)
bool(true)
int(0)
bool(false)
bool(true)
int(0)
bool(true)
bool(false)
float(0)
Distlock\LockLostException
bool(false)
