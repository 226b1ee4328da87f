--TEST--
distlock OO: a semaphore of P permits on one node admits P holders, a release frees one, permits are leases (extend, expiry, AUTO_RENEW, found lost), P may change
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
$nowMs = function () use ($r): int { [$s, $us] = $r->time(); return (int)$s * 1000 + intdiv((int)$us, 1000); };

// P = 2: two permits, the third caller gets null.
$k = dl_test_key('sem');
$a = $c->trySemaphore($k, 2, 10);
$b = $c->trySemaphore($k, 2, 10);
var_dump($a instanceof Lock, $b instanceof Lock, $a->token() !== $b->token());
var_dump($c->trySemaphore($k, 2, 10));

// The wire format: a sorted set; each token scored by its expiry in ms since
// the epoch (server time), the marker member scored P.
$now = $nowMs();
var_dump($r->type($k) === Redis::REDIS_ZSET, $r->zScore($k, '__distlock_semaphore__'), $r->zCard($k));
$s = $r->zScore($k, $a->token());
var_dump($s > $now + 9000 && $s <= $now + 10000);

// A permit is a lease like a lock.
var_dump($a->key() === $k, $a->keys() === [$k], $a->fence(), $a->fences());
$v = $a->validity();
var_dump($v > 9.0 && $v <= 10.0, $a->isHeld(), $a->isLost());
$v = $a->extend(30);
var_dump($v > 29.0 && $v <= 30.0, $r->zScore($k, $a->token()) > $nowMs() + 29000);

// A release frees a permit (once), for the next caller.
var_dump($a->release(), $r->zScore($k, $a->token()), $a->release(), $a->isHeld());
$d = $c->trySemaphore($k, 2, 10);
var_dump($d instanceof Lock);

// semaphore() waits up to its timeout, then gives up: still held (code HELD).
$t0 = microtime(true);
try { $c->semaphore($k, 2, 10, 0.3); echo "got a third permit\n"; }
catch (Distlock\LockTimeoutException $e) {
    $el = microtime(true) - $t0;
    echo get_class($e), ' ', $e->getCode(), ': ', $e->getMessage(), "\n";
    var_dump($el >= 0.25 && $el < 2.0);
}

// The latest acquire sets P: 3 admits one more; then 1 admits nobody new
// until enough permits are released.
$e3 = $c->trySemaphore($k, 3, 10);
var_dump($e3 instanceof Lock, $r->zScore($k, '__distlock_semaphore__'));
var_dump($c->trySemaphore($k, 1, 10));
var_dump($b->release(), $d->release());
var_dump($c->trySemaphore($k, 1, 10));   // $e3 still holds the one permit
var_dump($e3->release());
$one = $c->trySemaphore($k, 1, 10);
var_dump($one instanceof Lock, $r->zScore($k, '__distlock_semaphore__'));
unset($one);                               // a Lock that goes away releases its permit
var_dump($r->zCard($k) <= 1);

// A permit that is not renewed expires and comes back; AUTO_RENEW keeps a
// short permit alive while the Lock lives.
$k = dl_test_key('sem-renew');
$kept = $c->trySemaphore($k, 2, 0.3, Client::AUTO_RENEW);
$plain = $c->trySemaphore($k, 2, 0.3);
// Let 1 s pass (more than three TTLs) -- the passing of time is what is tested here.
$end = microtime(true) + 1.0;
$alive = true;
while (microtime(true) < $end) {
    $alive = $alive && $r->zScore($k, $kept->token()) !== false;
    usleep(20000);
}
var_dump($alive, $kept->isHeld(), $plain->isHeld(), $plain->validity());
$again = $c->trySemaphore($k, 2, 10);      // the expired permit came back
var_dump($again instanceof Lock, $r->zScore($k, $plain->token()));
var_dump($plain->release(), $kept->release(), $again->release());
// A permit removed behind its back (ZREM of its token) is found lost by the
// renewal: isLost(), the onLost callback at the next call, extend() throws.
$k = dl_test_key('sem-lost');
$l = $c->trySemaphore($k, 2, 0.3, Client::AUTO_RENEW);
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
NULL
bool(true)
float(2)
int(3)
bool(true)
bool(true)
bool(true)
NULL
NULL
bool(true)
bool(true)
bool(false)
bool(true)
bool(true)
bool(true)
bool(false)
bool(false)
bool(false)
bool(true)
Distlock\LockTimeoutException 500002: distlock: could not get a permit of "phpt:%x:sem" within 0.300 seconds: all its permits are held
bool(true)
bool(true)
float(3)
NULL
bool(true)
bool(true)
NULL
bool(true)
bool(true)
float(1)
bool(true)
bool(true)
bool(true)
bool(false)
float(0)
bool(true)
bool(false)
bool(false)
bool(true)
bool(true)
onLost: this key
bool(true)
bool(false)
Distlock\LockLostException
bool(false)
