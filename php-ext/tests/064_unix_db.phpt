--TEST--
distlock: unix:// sockets and database indexes in distlock.servers and Client, seen by the seed's client on the same db
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS_SOCK')) die('skip DISTLOCK_TEST_REDIS_SOCK not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
$sock = getenv('DISTLOCK_TEST_REDIS_SOCK');
$r = dl_test_phpredis();
[$host, $port] = dl_test_hostport(dl_test_uri());

// Compat functions over the Unix socket, database 3.
ini_set('distlock.servers', "unix://$sock?db=3");
$k = dl_test_key('unix-db3');
$t = distributedLock($k, 30);
$r->select(3);
var_dump($r->get($k) === $t);
$r->select(0);
var_dump($r->exists($k));
var_dump(distributedUnlock($k, $t));

// OO over TCP, database 5: the seed-style SET NX in db 5 excludes us, in db 0 it does not.
$c = new Distlock\Client("redis://$host:$port/5");
$k = dl_test_key('tcp-db5');
$r->select(5);
$r->set($k, 'seed', ['NX', 'EX' => 30]);
var_dump($c->tryLock($k, 10));
$r->del($k);
$r->select(0);
$r->set($k, 'seed-db0', ['NX', 'EX' => 30]);
$l = $c->tryLock($k, 10);
var_dump($l instanceof Distlock\Lock, $r->get($k));
var_dump($l->release());
var_dump($c->servers() === ["redis://$host:$port/5"] || str_contains($c->servers()[0], '/5'));
?>
--EXPECT--
bool(true)
int(0)
bool(true)
NULL
bool(true)
string(8) "seed-db0"
bool(true)
bool(true)
