--TEST--
distlock: a redis-cluster:// server list (INI and OO API): lock, release, extend, wait, fencing on the key's slot master; a hash-tag key; a brace key that cannot be fenced on a cluster is a ValueError/exception, never a CROSSSLOT; a Redlock of a cluster and two plain masters
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_CLUSTER')) die('skip DISTLOCK_TEST_CLUSTER not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
require __DIR__ . '/fixtures/common.inc';
$uri = getenv('DISTLOCK_TEST_CLUSTER');
$seeds = explode(',', substr($uri, strlen('redis-cluster://')));
// phpredis's own cluster client, to look at the key where the cluster keeps it
$rc = new RedisCluster(null, $seeds, 2.0, 2.0);

// OO API on the cluster
$c = new Client($uri);
var_dump($c->servers() === [$uri], $c->quorum());
$other = new Client($uri, ['command_timeout_ms' => 400]);
$ok = true;
foreach (['a', 'b', 'c', 'd', 'order:{42}', 'x'] as $n) {      // keys on different slots/masters
    $k = dl_test_key("cl-$n");
    $l = $c->tryLock($k, 30);
    $ok = $ok && $l instanceof Distlock\Lock && $rc->get($k) === $l->token();
    $ok = $ok && $other->tryLock($k, 30) === null;                 // held: the other is refused
    $ok = $ok && $l->extend(60) > 30 && $rc->pttl($k) > 30000;
    $ok = $ok && $l->release() && $rc->exists($k) === 0;
}
var_dump($ok);

// wait: lock() with a timeout gets the key once its holder's TTL runs out
$k = dl_test_key('cl-wait');
$held = $other->tryLock($k, 0.3);
$t0 = microtime(true);
$l = $c->lock($k, 30, 5.0);
$waited = microtime(true) - $t0;
var_dump($waited > 0.1 && $waited < 4.0, $rc->get($k) === $l->token(), $l->release());

// fencing: increasing across owners; the counter beside the key, in its slot
$k = dl_test_key('cl-fence') . ':{f}';
$prev = -1;
$ok = true;
for ($i = 0; $i < 10; $i++) {
    $l = ($i % 2 ? $other : $c)->tryLock($k, 10, Client::FENCING);
    $f = $l->fence();
    $ok = $ok && is_int($f) && $f > $prev && (int)$rc->get("$k:fence") === $f;
    $prev = $f;
    $l->release();
}
var_dump($ok);

// a key with a '}' and no hash tag: its fence counter could not share its
// slot, so FENCING is refused at the API (a plain lock on it works)
try { $c->tryLock('a}b', 10, Client::FENCING); echo "no exception\n"; }
catch (\Throwable $e) { var_dump(str_contains($e->getMessage(), 'hash tag'), str_contains($e->getMessage(), 'CROSSSLOT')); }
$l = $c->tryLock('a}b', 10);
var_dump($l instanceof Distlock\Lock, $l->release());

// the INI and the compat functions
ini_set('distlock.servers', $uri);
$k = dl_test_key('cl-ini');
$t = distributedLock($k, 30);
var_dump(is_string($t), $rc->get($k) === $t, distributedUnlock($k, $t), $rc->exists($k));

// Redlock: the cluster and two plain masters, quorum 2
$plain = array_slice(dl_test_redlock(), 0, 2);
$rl = new Client(implode(',', array_merge([$uri], $plain)));
var_dump(count($rl->servers()), $rl->quorum());
$k = dl_test_key('cl-redlock');
$pr = array_map(fn($u) => dl_test_phpredis($u), $plain);
$everywhere = fn($l) => dl_test_wait_for(fn() => $rc->get($k) === $l->token()
    && $pr[0]->get($k) === $l->token() && $pr[1]->get($k) === $l->token(), 1.0);
// A round ends once a quorum answered; a call still waiting for a new
// connection is then not sent: a fresh client's first lock may be on 2 of 3.
for ($i = 0; $i < 50; $i++) {
    $l = $rl->tryLock($k, 30, Client::FENCING);
    if ($everywhere($l)) break;
    $l->release();
}
$rl2 = new Client(implode(',', array_merge([$uri], $plain)), ['command_timeout_ms' => 400]);
var_dump($i < 50, $rl2->tryLock($k, 30), is_int($l->fence()));   // another owner: refused
var_dump($l->release(), dl_test_wait_for(fn() => $rc->exists($k) === 0, 3.0));
?>
--EXPECT--
bool(true)
int(1)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(false)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
int(0)
int(3)
int(2)
bool(true)
NULL
bool(true)
bool(true)
bool(true)
