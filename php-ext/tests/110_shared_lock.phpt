--TEST--
distlock OO: Client::SHARED read locks on one node share a key and exclude writers (tryLock, lock, distributedLock); a writer excludes readers; read locks are leases (extend, AUTO_RENEW, found lost)
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
use Distlock\Lock;
require __DIR__ . '/fixtures/common.inc';
$r = dl_test_phpredis();
$c = new Client(dl_test_uri());
ini_set('distlock.servers', dl_test_uri());
$nowMs = function () use ($r): int { [$s, $us] = $r->time(); return (int)$s * 1000 + intdiv((int)$us, 1000); };

// Two readers share the key: a sorted set of their tokens scored by expiry.
$k = dl_test_key('rw');
$r1 = $c->tryLock($k, 10, Client::SHARED);
$r2 = $c->tryLock($k, 20, Client::SHARED);
var_dump($r1 instanceof Lock, $r2 instanceof Lock);
$now = $nowMs();
var_dump($r->type($k) === Redis::REDIS_ZSET, $r->zCard($k), $r->zScore($k, '__write__'));
$s1 = $r->zScore($k, $r1->token());
var_dump($s1 > $now + 9000 && $s1 <= $now + 10000, $r->pttl($k) > 19000);
var_dump($r1->key() === $k, $r1->keys() === [$k], $r1->fence(), $r1->fences());

// Writers are excluded: tryLock null, distributedLock the seed's 500002,
// a waiting lock() gives up after its timeout and takes its intent back.
var_dump($c->tryLock($k, 10));
try { distributedLock($k, 10); echo "compat got it\n"; } catch (Exception $e) { echo get_class($e), ' ', $e->getCode(), "\n"; }
try { $c->lock($k, 10, 0.3); echo "writer got it\n"; }
catch (Distlock\LockTimeoutException $e) { echo get_class($e), ' ', $e->getMessage(), "\n"; }
var_dump($r->zScore($k, '__write__'), $r->zCard($k));

// A reader's lease: extend, release (once).
$v = $r1->extend(30);
var_dump($v > 29.0, $r->zScore($k, $r1->token()) > $nowMs() + 29000);
var_dump($r1->release(), $r->zScore($k, $r1->token()), $r1->release());
var_dump($c->tryLock($k, 10));            // $r2 still reads
var_dump($r2->release(), $r->exists($k));

// A writer on a free key: today's string key; readers are excluded.
$w = $c->tryLock($k, 10);
var_dump($r->get($k) === $w->token());
var_dump($c->tryLock($k, 10, Client::SHARED));
try { $c->lock($k, 10, 0.3, Client::SHARED); echo "reader got it\n"; }
catch (Distlock\LockTimeoutException $e) { echo get_class($e), ' ', $e->getMessage(), "\n"; }
var_dump($w->release());

// A reader on a free key after the writer, and AUTO_RENEW keeps a short read lock.
$rr = $c->tryLock($k, 0.3, Client::SHARED | Client::AUTO_RENEW);
$end = microtime(true) + 1.0;
$alive = true;
while (microtime(true) < $end) {        // the passing of time is what is tested here
    $alive = $alive && $r->zScore($k, $rr->token()) !== false;
    usleep(20000);
}
var_dump($alive, $rr->isHeld(), $rr->release());
// A read lock removed behind its back (ZREM of its token) is found lost by the
// renewal: isLost(), the onLost callback at the next call, extend() throws.
$k = dl_test_key('rw-lost');
$l = $c->tryLock($k, 0.3, Client::SHARED | Client::AUTO_RENEW);
$l->onLost(function (Lock $lost) { echo "onLost: ", $lost->key() === $GLOBALS['k'] ? 'this key' : 'another key', "\n"; });
$r->zRem($k, $l->token());
var_dump(dl_test_wait_for(fn() => $l->isLost(), 3.0), $l->isHeld());
try { $l->extend(); echo "extended\n"; } catch (Distlock\LockLostException $e) { echo get_class($e), "\n"; }
var_dump($l->release());
?>
--EXPECTF--
bool(true)
bool(true)
bool(true)
int(2)
bool(false)
bool(true)
bool(true)
bool(true)
bool(true)
NULL
NULL
NULL
Exception 500002
Distlock\LockTimeoutException distlock: could not lock "phpt:%x:rw" within 0.300 seconds: held by another owner
bool(false)
int(2)
bool(true)
bool(true)
bool(true)
bool(false)
bool(false)
NULL
bool(true)
int(0)
bool(true)
NULL
Distlock\LockTimeoutException distlock: could not lock "phpt:%x:rw" within 0.300 seconds: held by another owner
bool(true)
bool(true)
bool(true)
bool(true)
onLost: this key
bool(true)
bool(false)
Distlock\LockLostException
bool(false)
