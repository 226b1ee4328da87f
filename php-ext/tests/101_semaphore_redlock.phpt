--TEST--
distlock OO: a semaphore on three independent nodes: a permit needs floor(N*P/(P+1))+1 nodes (P=2: all three), so P+1 holders never fit, even where a majority would admit them
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDLOCK')) die('skip DISTLOCK_TEST_REDLOCK not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
use Distlock\Lock;
require __DIR__ . '/fixtures/common.inc';
$nodes = dl_test_redlock();
$r = array_map('dl_test_phpredis', $nodes);
$c = new Client(implode(',', $nodes));
$members = fn($k, $tok) => implode(' ', array_map(fn($x) => $x->zScore($k, $tok) === false ? '-' : 'y', $r));
// A round ends as soon as enough nodes decided it; the write to the last may
// still be in flight: wait (bounded) for the nodes to settle to $want.
$settled = fn($k, $tok, $want) => dl_test_wait_for(fn() => $members($k, $tok) === $want, 3.0) ? $want : $members($k, $tok);

// P = 2 on N = 3: k = floor(3*2/3)+1 = 3 nodes per permit. Two holders, on every node.
$k = dl_test_key('sem-rl');
$a = $c->trySemaphore($k, 2, 10);
$b = $c->trySemaphore($k, 2, 10);
var_dump($a instanceof Lock, $b instanceof Lock);
var_dump($settled($k, $a->token(), 'y y y'), $settled($k, $b->token(), 'y y y'));
var_dump($c->trySemaphore($k, 2, 10));
var_dump($a->release(), $settled($k, $a->token(), '- - -'));
$d = $c->trySemaphore($k, 2, 10);
var_dump($d instanceof Lock);
var_dump($b->release(), $d->release());

// Two foreign permits laid out as a majority rule would admit them: A on
// nodes 0 and 1, B on nodes 1 and 2 (each node then carries at most P = 2).
// A majority (2 of 3) would admit a third holder (nodes 0 and 2 have room);
// the rule needs 3 nodes, node 1 is full: null, and nothing of ours stays
// on nodes 0 and 2.
$k = dl_test_key('sem-rl-spread');
[$s] = $r[0]->time();
$exp = ((int)$s + 60) * 1000;
foreach ([[0, 'A'], [1, 'A'], [1, 'B'], [2, 'B']] as [$i, $tok]) {
    $r[$i]->zAdd($k, $exp, $tok, 2, '__distlock_semaphore__');
}
var_dump($c->trySemaphore($k, 2, 10));
var_dump(array_map(fn($x) => $x->zCard($k), $r));
// P = 1 needs 2 of 3 (the Redlock quorum): ... and P = 3 fits 3 permits on
// each node: granted on all three.
$e = $c->trySemaphore($k, 3, 10);
var_dump($e instanceof Lock, $settled($k, $e->token(), 'y y y'));
var_dump($e->release());

// P = 1: two of three nodes suffice; a foreign permit on one node does not stop us.
$k = dl_test_key('sem-rl-p1');
$r[2]->zAdd($k, $exp, 'other', 1, '__distlock_semaphore__');
$f = $c->trySemaphore($k, 1, 10);
var_dump($f instanceof Lock, $settled($k, $f->token(), 'y y -'));
var_dump($c->trySemaphore($k, 1, 10));
var_dump($f->release());

// One node down: P = 1 (2 of 3) still works; P = 2 (3 of 3) cannot: NO_QUORUM,
// and nothing stays on the two live nodes.
$dead = 'redis://127.0.0.1:' . dl_test_free_port();
$c2 = new Client("$nodes[0],$nodes[1],$dead", ['connect_timeout_ms' => 200, 'command_timeout_ms' => 200]);
$k = dl_test_key('sem-rl-down');
$g = $c2->trySemaphore($k, 1, 10);
var_dump($g instanceof Lock, $g->release());
try {
    $h = $c2->trySemaphore($k . '-2', 2, 10);
    echo "got ", var_export($h, true), "\n";
} catch (Distlock\Exception $e) {
    echo get_class($e), ' ', $e->getCode(), ': ', $e->getMessage(), "\n";
}
var_dump($r[0]->exists($k . '-2'), $r[1]->exists($k . '-2'));
?>
--EXPECTF--
bool(true)
bool(true)
string(5) "y y y"
string(5) "y y y"
NULL
bool(true)
string(5) "- - -"
bool(true)
bool(true)
bool(true)
NULL
array(3) {
  [0]=>
  int(2)
  [1]=>
  int(3)
  [2]=>
  int(2)
}
bool(true)
string(5) "y y y"
bool(true)
bool(true)
string(5) "y y -"
NULL
bool(true)
bool(true)
bool(true)
Distlock\AcquireException 500015: distlock: semaphore "phpt:%x:sem-rl-down-2" failed: acquire of 'phpt:%x:sem-rl-down-2': %d of 3 nodes answered, %d granted (need 3); %s (quorum of nodes unreachable)
int(0)
int(0)
