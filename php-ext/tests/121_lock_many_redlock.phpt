--TEST--
distlock OO: tryLockMany on three independent nodes: a node grants all keys or none, the set needs a quorum, a refused set leaves nothing on any node
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
// Connect every node first: the set is checked on every node.
dl_test_connect_every_node($c, $r);
// Per node: which keys hold $tok ('y'), another value ('o') or nothing ('-').
$grid = fn($ks, $tok) => implode(' ', array_map(fn($x) => implode('', array_map(
    fn($k) => ($v = $x->get($k)) === false ? '-' : ($v === $tok ? 'y' : 'o'), $ks)), $r));
$settled = fn($ks, $tok, $want) => dl_test_wait_for(fn() => $grid($ks, $tok) === $want, 3.0) ? $want : $grid($ks, $tok);

$ks = [dl_test_key('rl-many-a'), dl_test_key('rl-many-b'), dl_test_key('rl-many-c')];
$l = $c->tryLockMany($ks, 10, Client::FENCING);
var_dump($l instanceof Lock, $settled($ks, $l->token(), 'yyy yyy yyy'), count($l->fences()));
var_dump($c->tryLockMany([$ks[2]], 10));
var_dump($l->release(), $settled($ks, '', '--- --- ---'));

// Key b held by another owner on 2 of 3 nodes: no quorum; a and c are
// written nowhere (the one node that could grant refused or undid).
$r[0]->set($ks[1], 'other', ['PX' => 60000]);
$r[1]->set($ks[1], 'other', ['PX' => 60000]);
var_dump($c->tryLockMany($ks, 10), $settled($ks, '', '-o- -o- ---'));

// ... on 1 of 3: the other two grant the whole set; that node grants none of it.
$r[1]->del($ks[1]);
$l = $c->tryLockMany($ks, 10);
var_dump($l instanceof Lock, $settled($ks, $l->token(), '-o- yyy yyy'));
var_dump($l->release(), $settled($ks, '', '-o- --- ---'));
?>
--EXPECT--
bool(true)
string(11) "yyy yyy yyy"
int(3)
NULL
bool(true)
string(11) "--- --- ---"
NULL
string(11) "-o- -o- ---"
bool(true)
string(11) "-o- yyy yyy"
bool(true)
string(11) "-o- --- ---"
