--TEST--
distlock OO: Lock::abandon() lets go of a lock without releasing it: the key keeps the token until its TTL (also when the Lock is destroyed), the renewal stops, on 1 and 3 nodes and for several keys; release/extend/onLost/abandon throw afterwards, isHeld() is false
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS') || !getenv('DISTLOCK_TEST_REDLOCK')) die('skip DISTLOCK_TEST_REDIS / DISTLOCK_TEST_REDLOCK not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
require __DIR__ . '/fixtures/common.inc';

function err(string $what, callable $f): void
{
    try { $f(); echo "$what: no error\n"; }
    catch (Throwable $e) { echo "$what: ", get_class($e), ' ', $e->getCode(), ': ', $e->getMessage(), "\n"; }
}

$r = dl_test_phpredis();
$c = new Client(dl_test_uri());
ini_set('distlock.servers', dl_test_uri());

// One node: the key keeps the token with the TTL it had.
$k = dl_test_key('abandon');
$l = $c->tryLock($k, 30, Client::FENCING);
$tok = $l->token();
$fence = $l->fence();
$l->abandon();
var_dump($r->get($k) === $tok, $r->pttl($k) > 25000);
// The object still tells what it held, holds nothing, and never says lost.
var_dump($l->isHeld(), $l->validity(), $l->isLost(), $l->key() === $k, $l->keys() === [$k],
         $l->token() === $tok, $l->fence() === $fence, $l->fences() === [$fence]);
ob_start(); var_dump($l); $dump = ob_get_clean();
echo $dump;
var_dump(str_contains($dump, $tok));
// What would release, extend or watch the key throws; so does a second abandon().
err('release', fn() => $l->release());
err('extend', fn() => $l->extend(10));
err('onLost', fn() => $l->onLost(fn() => null));
err('abandon', fn() => $l->abandon());
err('check', fn() => $l->check());
// Still held by the abandoned token: others are excluded ...
var_dump($c->tryLock($k, 5));
// ... also after the Lock object is gone (no release on destruction).
unset($l);
var_dump($r->get($k) === $tok);
// The token still releases it (a framework's release by owner token).
var_dump(distributedUnlock($k, $tok), $r->exists($k));

// AUTO_RENEW stops: the key runs out by its TTL, and the onLost callback
// set before abandon() never runs (nobody finds an abandoned lock lost).
$k = dl_test_key('abandon-renew');
$l = $c->tryLock($k, 1.0, Client::AUTO_RENEW);
$l->onLost(function () { echo "onLost called\n"; });
$tok = $l->token();
$l->abandon();
var_dump($r->get($k) === $tok);
var_dump(dl_test_wait_for(fn() => !$r->exists($k), 10.0));
var_dump($c->holder($k)['held'], $l->isLost());   // a safe point; still not lost
unset($l);

// Three nodes, and a lock on several keys: every node keeps every key.
$nodes = dl_test_redlock();
$rs = array_map('dl_test_phpredis', $nodes);
$c3 = new Client(implode(',', $nodes));
$ka = dl_test_key('abandon3a');
$kb = dl_test_key('abandon3b');
// Connect every node first: every node is checked below.
dl_test_connect_every_node($c3, $rs);
$l = $c3->tryLockMany([$ka, $kb], 30);
$tok = $l->token();
$l->abandon();
unset($l);
// tryLockMany returns once a quorum granted: the last node's grant may
// still be on its way, so wait (bounded) for every node to carry both keys.
$kept_now = function () use ($rs, $ka, $kb, $tok): int {
    $kept = 0;
    foreach ($rs as $n) {
        $kept += ($n->get($ka) === $tok) + ($n->get($kb) === $tok);
    }
    return $kept;
};
dl_test_wait_for(fn() => $kept_now() === 2 * count($rs), 3.0);
var_dump($kept_now());
var_dump($c3->tryLock($ka, 5), $c3->holder($kb)['token'] === $tok);
var_dump($c3->forceRelease($ka), $c3->forceRelease($kb));
?>
--EXPECTF--
bool(true)
bool(true)
bool(false)
float(0)
bool(false)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
object(Distlock\Lock)#%d (3) {
  ["key"]=>
  string(%d) "%s"
  ["held"]=>
  bool(false)
  ["abandoned"]=>
  bool(true)
}
bool(false)
release: Distlock\Exception 500018: distlock: lock "%s" was abandoned (Lock::abandon()): it can no longer be released or extended; the key keeps its token until its TTL
extend: Distlock\Exception 500018: distlock: lock "%s" was abandoned (Lock::abandon()): it can no longer be released or extended; the key keeps its token until its TTL
onLost: Distlock\Exception 500018: distlock: lock "%s" was abandoned (Lock::abandon()): it can no longer be released or extended; the key keeps its token until its TTL
abandon: Distlock\Exception 500018: distlock: lock "%s" was abandoned (Lock::abandon()): it can no longer be released or extended; the key keeps its token until its TTL
check: Distlock\LockLostException 500016: distlock: lock "%s" was abandoned (Lock::abandon())
NULL
bool(true)
bool(true)
int(0)
bool(true)
bool(true)
bool(false)
bool(false)
int(6)
NULL
bool(true)
int(3)
int(3)
