--TEST--
distlock OO on a redis-cluster://: tryLockMany over keys in several slots (all or nothing, undone when a later slot refuses), a semaphore and read locks on their slot's master
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_CLUSTER')) die('skip DISTLOCK_TEST_CLUSTER not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
use Distlock\Lock;
require __DIR__ . '/fixtures/common.inc';
$uri = getenv('DISTLOCK_TEST_CLUSTER');
$seeds = explode(',', substr($uri, strlen('redis-cluster://')));
$rc = new RedisCluster(null, $seeds, 2.0, 2.0);   // phpredis's cluster client, to look
$c = new Client($uri);

// Keys on several slots (and masters), two of them sharing one slot by a hash tag.
$ks = array_map(fn($n) => dl_test_key("clm-$n"), ['a', 'b', 'c', 'd', 'x:{t}', 'y:{t}']);
var_dump(count(array_unique(array_map(fn($k) => $rc->cluster($rc->_masters()[0], 'KEYSLOT', $k), $ks))) >= 4);
$l = $c->tryLockMany($ks, 30, Client::FENCING);
var_dump($l instanceof Lock, array_map(fn($k) => $rc->get($k), $ks) === array_fill(0, 6, $l->token()));
var_dump(count($l->fences()), $l->extend(60) > 59.0, min(array_map(fn($k) => $rc->pttl($k), $ks)) > 59000);
var_dump($l->release(), array_sum(array_map(fn($k) => $rc->exists($k), $ks)));

// One key held by another owner: null, and no key of the set stays written
// (slots taken before the refusing one are undone), whichever slot it is in.
$ok = true;
foreach ($ks as $i => $busy) {
    $rc->set($busy, 'other', ['PX' => 60000]);
    $ok = $ok && $c->tryLockMany($ks, 30) === null;
    foreach ($ks as $j => $k) {
        $ok = $ok && $rc->get($k) === ($j === $i ? 'other' : false);
    }
    $rc->del($busy);
}
var_dump($ok);

// A semaphore and read locks, on their key's master.
$k = dl_test_key('cl-sem');
$a = $c->trySemaphore($k, 1, 30);
var_dump($a instanceof Lock, $c->trySemaphore($k, 1, 30), $rc->zScore($k, '__distlock_semaphore__'));
var_dump($a->release());
$k = dl_test_key('cl-read');
$r1 = $c->tryLock($k, 30, Client::SHARED);
$r2 = $c->tryLock($k, 30, Client::SHARED);
var_dump($r1 instanceof Lock, $r2 instanceof Lock, $rc->zCard($k), $c->tryLock($k, 30));
var_dump($r1->release(), $r2->release());
$w = $c->lock($k, 30, 5.0);
var_dump($rc->get($k) === $w->token(), $w->release());
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
int(6)
bool(true)
bool(true)
bool(true)
int(0)
bool(true)
bool(true)
NULL
float(1)
bool(true)
bool(true)
bool(true)
int(2)
NULL
bool(true)
bool(true)
bool(true)
bool(true)
