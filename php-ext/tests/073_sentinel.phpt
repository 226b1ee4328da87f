--TEST--
distlock: a redis-sentinel:// server list works like a plain one (lock, release, wait, the compat functions); the sentinels' password is never shown
--EXTENSIONS--
distlock
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_SENTINEL')) die('skip DISTLOCK_TEST_SENTINEL not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
$uri = getenv('DISTLOCK_TEST_SENTINEL');
$k = dl_test_key('sentinel');
$c = new Distlock\Client($uri);
var_dump(str_starts_with($c->servers()[0], 'redis-sentinel://'));
var_dump(str_contains($c->servers()[0], 'sentinel-pw') || str_contains($c->servers()[0], 'data-pw'));
$l = $c->tryLock($k, 30);
var_dump($l instanceof Distlock\Lock, $c->tryLock($k, 30));
var_dump($l->release());
$l = $c->lock($k, 30, 5.0);
var_dump($l->isHeld(), $l->release());

ini_set('distlock.servers', $uri);
$t = distributedLock($k, 30);
var_dump(is_string($t), distributedUnlock($k, $t));

// a wrong sentinel password: a ConnectionException naming the sentinel, not the password
$bad = preg_replace('/sentinel_password=[^&]*/', 'sentinel_password=wrong-one', $uri);
try { (new Distlock\Client($bad))->tryLock($k, 30); echo "no exception\n"; }
catch (Distlock\ConnectionException $e) {
    var_dump(str_contains($e->getMessage(), 'authentication failed'), str_contains($e->getMessage(), 'wrong-one'));
}
?>
--EXPECT--
bool(true)
bool(false)
bool(true)
NULL
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(false)
