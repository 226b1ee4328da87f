--TEST--
distlock OO: tryLockMany / lockMany take all keys or none on one node, as one lease (one token, extend, release, AUTO_RENEW, lost when one key is lost), with one fence per key
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
$ks = [dl_test_key('many-a'), dl_test_key('many-b'), dl_test_key('many-c')];
$vals = fn($keys) => array_map(fn($k) => $r->get($k), $keys);

// Every key is a plain lock holding the set's one token.
$l = $c->tryLockMany($ks, 10);
var_dump($l instanceof Lock, $l->keys() === $ks, $l->key() === $ks[0]);
var_dump($vals($ks) === array_fill(0, 3, $l->token()), $r->pttl($ks[2]) > 9000);
var_dump($l->fence(), $l->fences());
ob_start(); var_dump($l); $dump = ob_get_clean();
var_dump(str_contains($dump, $ks[2]), str_contains($dump, $l->token()));

// Each key is excluded for others, singly or in a set.
var_dump($c->tryLock($ks[1], 10), $c->tryLockMany([dl_test_key('many-d'), $ks[2]], 10));
var_dump($r->exists(dl_test_key('many-d')));

// One lease: extend and release cover every key.
$v = $l->extend(30);
var_dump($v > 29.0, min(array_map(fn($k) => $r->pttl($k), $ks)) > 29000);
var_dump($l->release(), $r->exists(...$ks), $l->release());

// All or nothing: one key held by another owner -> null, nothing written.
$r->set($ks[1], 'other', ['PX' => 60000]);
var_dump($c->tryLockMany($ks, 10), $vals($ks));
try { $c->lockMany($ks, 10, 0.3); echo "got them\n"; }
catch (Distlock\LockTimeoutException $e) { echo get_class($e), ' ', $e->getCode(), ': ', $e->getMessage(), "\n"; }
var_dump($vals($ks));
$r->del($ks[1]);

// An array's values in its order are the keys (its keys do not matter).
$l = $c->tryLockMany(['x' => $ks[2], 'y' => $ks[0]], 10);
var_dump($l->keys() === [$ks[2], $ks[0]], $r->exists($ks[1]));
unset($l);                         // a Lock that goes away releases every key
var_dump($r->exists(...$ks));

// FENCING: one fence per key, each above the key's earlier fences.
$f1 = $c->tryLockMany($ks, 10, Client::FENCING);
$first = $f1->fences();
var_dump(count($first), $f1->fence() === $first[0]);
$f1->release();
$single = $c->tryLock($ks[1], 10, Client::FENCING);
var_dump($single->fences() === [$single->fence()], $single->fence() > $first[1]);
$single->release();
$f2 = $c->tryLockMany($ks, 10, Client::FENCING);
$second = $f2->fences();
var_dump($second[0] > $first[0], $second[1] > $single->fence(), $second[2] > $first[2]);
$f2->release();

// AUTO_RENEW keeps every key; deleting one behind its back loses the set.
$l = $c->tryLockMany($ks, 0.3, Client::AUTO_RENEW);
$end = microtime(true) + 1.0;
$alive = true;
while (microtime(true) < $end) {       // the passing of time is what is tested here
    $alive = $alive && $vals($ks) === array_fill(0, 3, $l->token());
    usleep(20000);
}
var_dump($alive, $l->isHeld());
$r->del($ks[1]);
var_dump(dl_test_wait_for(fn() => $l->isLost(), 3.0), $l->isHeld());
try { $l->extend(); echo "extended\n"; } catch (Distlock\LockLostException $e) { echo get_class($e), "\n"; }
var_dump($l->release(), $r->exists(...$ks));
?>
--EXPECTF--
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
NULL
NULL
bool(true)
bool(false)
NULL
NULL
int(0)
bool(true)
bool(true)
bool(true)
int(0)
bool(false)
NULL
array(3) {
  [0]=>
  bool(false)
  [1]=>
  string(5) "other"
  [2]=>
  bool(false)
}
Distlock\LockTimeoutException 500002: distlock: could not lock "phpt:%x:many-a" and 2 more keys within 0.300 seconds: 'phpt:%x:many-b' (a key of the set) still held by another owner after 300 ms
array(3) {
  [0]=>
  bool(false)
  [1]=>
  string(5) "other"
  [2]=>
  bool(false)
}
bool(true)
int(0)
int(0)
int(3)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(false)
Distlock\LockLostException
bool(false)
int(0)
