--TEST--
distlock compat: Redlock over three servers from distlock.servers (quorum 2), foreign holders, a dead node
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDLOCK')) die('skip DISTLOCK_TEST_REDLOCK not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
$nodes = dl_test_redlock();
$r = array_map('dl_test_phpredis', $nodes);
ini_set('distlock.servers', implode(',', $nodes));
$vals = fn($k) => implode(' ', array_map(fn($x) => var_export($x->get($k), true), $r));
// A round ends as soon as a quorum decided it; the write to the last node may
// still be in flight. Wait (bounded) for the nodes to settle to $want.
$settled = fn($k, $want) => dl_test_wait_for(fn() => $vals($k) === $want, 3.0) ? $want : $vals($k);

// A new client's first call may end once a quorum answered, before its
// connection to the last node is up: that request is then not sent (by
// design; the lock is held on a quorum). So first make sure every
// connection is up: a lock that lands on all three nodes.
$warm = function () use ($vals) {
    $w = dl_test_key('rl-warm');
    $t = distributedLock($w, 30);
    $all = implode(' ', array_fill(0, 3, var_export($t, true)));
    $ok = dl_test_wait_for(fn() => $vals($w) === $all, 0.5);
    distributedUnlock($w, $t);
    return $ok;
};
var_dump(dl_test_wait_for($warm, 10.0));

// Taken on every node, released on every node.
$k = dl_test_key('rl-all');
$t = distributedLock($k, 30);
$all = implode(' ', array_fill(0, 3, var_export($t, true)));
var_dump($settled($k, $all) === $all);
var_dump(distributedUnlock($k, $t), $settled($k, 'false false false'));

// A foreign owner (the seed's SET NX) on 2 of 3 nodes: we do not get a quorum,
// throw like the seed, and leave nothing behind on the third node.
$k = dl_test_key('rl-foreign2');
$r[0]->set($k, '4711', ['NX', 'EX' => 60]);
$r[1]->set($k, '4711', ['NX', 'EX' => 60]);
try { distributedLock($k, 30); echo "got it\n"; }
catch (Exception $e) { echo get_class($e), ' ', $e->getCode(), "\n"; }
var_dump($settled($k, "'4711' '4711' false"));
// ... and the owner's token releases it through us (a quorum held it).
var_dump(distributedUnlock($k, 4711), $settled($k, 'false false false'));

// A foreign owner on 1 of 3: we still get 2 of 3; our release leaves theirs alone.
$k = dl_test_key('rl-foreign1');
$r[2]->set($k, 'other', ['NX', 'EX' => 60]);
$t = distributedLock($k, 30);
var_dump($r[0]->get($k) === $t, $r[1]->get($k) === $t, $r[2]->get($k));
var_dump(distributedUnlock($k, $t), $settled($k, "false false 'other'"));

// One dead node: quorum still reached.
$dead = 'redis://127.0.0.1:' . dl_test_free_port();
ini_set('distlock.connect_timeout_ms', '200');
ini_set('distlock.servers', "$nodes[0],$nodes[1],$dead");
$k = dl_test_key('rl-dead1');
$t = distributedLock($k, 30);
var_dump($r[0]->get($k) === $t, $r[1]->get($k) === $t);
var_dump(distributedUnlock($k, $t));

// Two dead nodes: no quorum -> Distlock\ConnectionException, and our one node is clean.
$dead2 = 'redis://127.0.0.1:' . dl_test_free_port();
ini_set('distlock.servers', "$nodes[0],$dead,$dead2");
$k = dl_test_key('rl-dead2');
try { distributedLock($k, 30); echo "got it\n"; }
catch (Exception $e) {
    echo get_class($e), "\n";
    var_dump(in_array($e->getCode(), [Distlock\Exception::CONNECTION, Distlock\Exception::NO_QUORUM], true));
}
var_dump(dl_test_wait_for(fn() => $r[0]->get($k) === false, 3.0));
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
string(17) "false false false"
Exception 500002
string(19) "'4711' '4711' false"
bool(true)
string(17) "false false false"
bool(true)
bool(true)
string(5) "other"
bool(true)
string(19) "false false 'other'"
bool(true)
bool(true)
bool(true)
Distlock\AcquireException
bool(true)
bool(true)
