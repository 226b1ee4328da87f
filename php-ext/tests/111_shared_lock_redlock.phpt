--TEST--
distlock OO: read locks on three independent nodes: readers share every node, a reader and a writer never both hold a quorum, a refused reader leaves nothing behind
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
// Connect every node first: the readers are checked on every node.
dl_test_connect_every_node($c, $r);
$members = fn($k, $tok) => implode(' ', array_map(fn($x) => $x->zScore($k, $tok) === false ? '-' : 'y', $r));
$types = fn($k) => implode(' ', array_map(fn($x) => [Redis::REDIS_NOT_FOUND => '-', Redis::REDIS_STRING => 'string', Redis::REDIS_ZSET => 'zset'][$x->type($k)] ?? '?', $r));
$settled = fn($f, $want) => dl_test_wait_for(fn() => $f() === $want, 3.0) ? $want : $f();

// Two readers, each on every node; a writer gets no quorum.
$k = dl_test_key('rw-rl');
$a = $c->tryLock($k, 10, Client::SHARED);
$b = $c->tryLock($k, 10, Client::SHARED);
var_dump($a instanceof Lock, $b instanceof Lock);
var_dump($settled(fn() => $members($k, $a->token()), 'y y y'), $settled(fn() => $members($k, $b->token()), 'y y y'));
var_dump($c->tryLock($k, 10));
var_dump($a->release(), $b->release(), $settled(fn() => $types($k), '- - -'));

// A foreign writer (a plain string lock) on 2 of 3 nodes: no reader gets a
// quorum, and the reader's grant on the third node is undone.
$k = dl_test_key('rw-rl-w2');
$r[0]->set($k, 'writer', ['PX' => 60000]);
$r[1]->set($k, 'writer', ['PX' => 60000]);
var_dump($c->tryLock($k, 10, Client::SHARED));
var_dump($settled(fn() => $types($k), 'string string -'));

// ... on 1 of 3: readers hold a quorum (nodes 2 and 3), a writer does not.
$k = dl_test_key('rw-rl-w1');
$r[0]->set($k, 'writer', ['PX' => 60000]);
$d = $c->tryLock($k, 10, Client::SHARED);
var_dump($d instanceof Lock, $settled(fn() => $types($k), 'string zset zset'));
var_dump($c->tryLock($k, 10));
var_dump($d->release(), $settled(fn() => $types($k), 'string - -'));

// Our writer holds every node: readers are refused everywhere.
$k = dl_test_key('rw-rl-ours');
$w = $c->tryLock($k, 10);
var_dump($settled(fn() => $types($k), 'string string string'));
var_dump($c->tryLock($k, 10, Client::SHARED), $w->release());
?>
--EXPECT--
bool(true)
bool(true)
string(5) "y y y"
string(5) "y y y"
NULL
bool(true)
bool(true)
string(5) "- - -"
NULL
string(15) "string string -"
bool(true)
string(16) "string zset zset"
NULL
bool(true)
string(10) "string - -"
string(20) "string string string"
NULL
bool(true)
