--TEST--
distlock OO: bad arguments of semaphores, read locks and tryLockMany/lockMany get a clear error naming them, and a key of another kind is refused (PROTOCOL), never granted; nothing is written
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
require __DIR__ . '/fixtures/common.inc';
$r = dl_test_phpredis();
$c = new Client(dl_test_uri());
ini_set('distlock.servers', dl_test_uri());
$k = dl_test_key('bad-prim');
$many = fn($n) => array_map(fn($i) => dl_test_key("bad-many-$i"), range(1, $n));

$cases = [
    'permits 0'         => fn() => $c->trySemaphore($k, 0),
    'permits -1'        => fn() => $c->trySemaphore($k, -1),
    'permits too many'  => fn() => $c->trySemaphore($k, 1000001),
    'permits huge'      => fn() => $c->semaphore($k, PHP_INT_MAX, 10, 1.0),
    'permits text'      => fn() => $c->trySemaphore($k, 'three'),
    'semaphore FENCING' => fn() => $c->trySemaphore($k, 2, 10, Client::FENCING),
    'semaphore SHARED'  => fn() => $c->trySemaphore($k, 2, 10, Client::SHARED),
    'semaphore flags'   => fn() => $c->semaphore($k, 2, 10, 1.0, 1 << 20),
    'semaphore key'     => fn() => $c->trySemaphore('', 2),
    'semaphore ttl'     => fn() => $c->trySemaphore($k, 2, 0),
    'semaphore timeout' => fn() => $c->semaphore($k, 2, 10, -1.0),
    'SHARED|FENCING'    => fn() => $c->tryLock($k, 10, Client::SHARED | Client::FENCING),
    'no keys'           => fn() => $c->tryLockMany([]),
    'too many keys'     => fn() => $c->tryLockMany($many(257)),
    'repeated key'      => fn() => $c->tryLockMany([$k . 'a', $k . 'b', $k . 'a']),
    'empty key in list' => fn() => $c->tryLockMany([$k . 'a', '']),
    'long key in list'  => fn() => $c->lockMany([$k . 'a', str_repeat('k', 1025)], 10, 1.0),
    'NUL in a key'      => fn() => $c->tryLockMany([$k . 'a', "a\0b"]),
    'int key'           => fn() => $c->tryLockMany([$k . 'a', 42]),
    'null key'          => fn() => $c->lockMany([null]),
    'many SHARED'       => fn() => $c->tryLockMany([$k . 'a'], 10, Client::SHARED),
    'many flags'        => fn() => $c->tryLockMany([$k . 'a'], 10, 1 << 20),
    'many ttl'          => fn() => $c->tryLockMany([$k . 'a'], -1),
    'many timeout'      => fn() => $c->lockMany([$k . 'a'], 10, NAN),
];
foreach ($cases as $name => $f) {
    try {
        $f();
        echo "$name: no error\n";
    } catch (Throwable $e) {
        echo "$name: ", get_class($e), ': ', $e->getMessage(), "\n";
    }
}
var_dump($r->exists($k, $k . 'a', $k . 'b', ...$many(257)));

// The largest valid values: P = 1000000, 256 keys.
$l = $c->trySemaphore($k, 1000000, 10);
var_dump($r->zScore($k, '__distlock_semaphore__'), $l->release());
$l = $c->tryLockMany($many(256), 10);
var_dump(count($l->keys()), $l->release());

// A key of another kind: an error (PROTOCOL), never a grant, never a crash;
// the key is left as it was.
$lock = dl_test_key('kind-lock');
$sem = dl_test_key('kind-sem');
$read = dl_test_key('kind-read');
$held = $c->tryLock($lock, 30);
$permit = $c->trySemaphore($sem, 2, 30);
$reader = $c->tryLock($read, 30, Client::SHARED);
$kinds = [
    'semaphore on a lock'        => fn() => $c->trySemaphore($lock, 2, 10),
    'semaphore on read locks'    => fn() => $c->semaphore($read, 2, 10, 1.0),
    'read lock on a semaphore'   => fn() => $c->tryLock($sem, 10, Client::SHARED),
    'lock on a semaphore'        => fn() => $c->lock($sem, 10, 1.0),
    'distributedLock on a semaphore' => fn() => distributedLock($sem, 10),
    'keys with a semaphore'      => fn() => $c->tryLockMany([$lock . '-free', $sem], 10),
    'keys with read locks'       => fn() => $c->lockMany([$read, $lock . '-free'], 10, 1.0),
];
foreach ($kinds as $name => $f) {
    try {
        $got = $f();
        echo "$name: ", var_export($got === null ? null : 'GRANTED', true), "\n";
    } catch (Throwable $e) {
        echo "$name: ", get_class($e), ' ', $e->getCode(), ': ', $e->getMessage(), "\n";
    }
}
var_dump($r->get($lock) === $held->token(), $r->zCard($sem), $r->zCard($read), $r->exists($lock . '-free'));
var_dump($held->release(), $permit->release(), $reader->release());
?>
--EXPECTF--
%A
