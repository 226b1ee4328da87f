--TEST--
distlock OO: bad arguments of semaphores, read locks and tryLockMany/lockMany get a clear error naming them, and a key of another kind is refused (PROTOCOL), never granted (a set meets read locks as a writer: held); nothing is written
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
    // ... but a set takes each key as a writer: read locks hold it (waited for).
    'keys with read locks'       => fn() => $c->lockMany([$read, $lock . '-free'], 10, 1.0),
    'keys with read locks, try'  => fn() => $c->tryLockMany([$lock . '-free', $read], 10),
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
permits 0: ValueError: distlock: semaphore: permits 0: use 1..1000000 (DISTLOCK_PERMITS_MAX)
permits -1: ValueError: distlock: semaphore: permits -1: use 1..1000000 (DISTLOCK_PERMITS_MAX)
permits too many: ValueError: distlock: semaphore: permits 1000001: use 1..1000000 (DISTLOCK_PERMITS_MAX)
permits huge: ValueError: distlock: semaphore: permits 9223372036854775807: use 1..1000000 (DISTLOCK_PERMITS_MAX)
permits text: TypeError: Distlock\Client::trySemaphore(): Argument #2 ($permits) must be of type int, string given
semaphore FENCING: ValueError: distlock: semaphore: flags 0x1: a semaphore permit takes DISTLOCK_AUTO_RENEW only
semaphore SHARED: ValueError: distlock: semaphore: flags 0x10: a semaphore permit takes DISTLOCK_AUTO_RENEW only
semaphore flags: ValueError: Distlock\Client::semaphore(): Argument #5 ($flags) must be 0 or a combination of Client::FENCING, Client::AUTO_RENEW and Client::SHARED
semaphore key: ValueError: Distlock\Client::trySemaphore(): Argument #1 ($key) must not be empty
semaphore ttl: ValueError: Distlock\Client::trySemaphore(): Argument #3 ($ttl) must be a finite number of seconds > 0, got 0
semaphore timeout: ValueError: Distlock\Client::semaphore(): Argument #4 ($timeout) must be between 0.000 and 2147483.647 seconds
SHARED|FENCING: ValueError: distlock: lock: DISTLOCK_SHARED (a read lock) does not take DISTLOCK_FENCING, DISTLOCK_FAIR or DISTLOCK_REENTRANT
no keys: ValueError: distlock: tryLockMany: nkeys 0 out of range 1..256
too many keys: ValueError: distlock: tryLockMany: nkeys 257 out of range 1..256
repeated key: ValueError: distlock: tryLockMany: key 'phpt:%x:bad-prima' appears twice (keys[0] and keys[2])
empty key in list: ValueError: distlock: tryLockMany: keys[1]: key must not be empty
long key in list: ValueError: distlock: lockMany: keys[1]: key longer than 1024 bytes
NUL in a key: ValueError: Distlock\Client::tryLockMany(): Argument #1 ($keys) must not contain keys with null bytes
int key: TypeError: Distlock\Client::tryLockMany(): Argument #1 ($keys) must contain only strings, int given
null key: TypeError: Distlock\Client::lockMany(): Argument #1 ($keys) must contain only strings, null given
many SHARED: ValueError: distlock: tryLockMany: DISTLOCK_SHARED is not for distlock_acquire_many() (it takes DISTLOCK_FENCING and DISTLOCK_AUTO_RENEW)
many flags: ValueError: Distlock\Client::tryLockMany(): Argument #3 ($flags) must be 0 or a combination of Client::FENCING, Client::AUTO_RENEW and Client::SHARED
many ttl: ValueError: Distlock\Client::tryLockMany(): Argument #2 ($ttl) must be a finite number of seconds > 0, got -1
many timeout: ValueError: Distlock\Client::lockMany(): Argument #3 ($timeout) must be between 0.000 and 2147483.647 seconds
int(0)
float(1000000)
bool(true)
int(256)
bool(true)
semaphore on a lock: Distlock\AcquireException 500017: distlock: semaphore "phpt:%x:kind-lock" failed: acquire of 'phpt:%x:kind-lock' failed; redis://127.0.0.1:%d: 'phpt:%x:kind-lock' holds a lock, not a semaphore (server error or unexpected reply)
semaphore on read locks: Distlock\AcquireException 500017: distlock: semaphore "phpt:%x:kind-read" failed: acquire of 'phpt:%x:kind-read' failed; redis://127.0.0.1:%d: 'phpt:%x:kind-read' holds read locks, not a semaphore (server error or unexpected reply)
read lock on a semaphore: Distlock\AcquireException 500017: distlock: lock "phpt:%x:kind-sem" failed: acquire of 'phpt:%x:kind-sem' failed; redis://127.0.0.1:%d: 'phpt:%x:kind-sem' is a semaphore, not a lock (server error or unexpected reply)
lock on a semaphore: Distlock\AcquireException 500017: distlock: lock "phpt:%x:kind-sem" failed: acquire of 'phpt:%x:kind-sem' failed; redis://127.0.0.1:%d: 'phpt:%x:kind-sem' is a semaphore, not a lock (server error or unexpected reply)
distributedLock on a semaphore: Distlock\AcquireException 500017: distlock: distributedLock "phpt:%x:kind-sem" failed: acquire of 'phpt:%x:kind-sem' failed; redis://127.0.0.1:%d: 'phpt:%x:kind-sem' is a semaphore, not a lock (server error or unexpected reply)
keys with a semaphore: Distlock\AcquireException 500017: distlock: tryLockMany "phpt:%x:kind-lock-free" failed: acquire of 'phpt:%x:kind-lock-free' failed; redis://127.0.0.1:%d: WRONGTYPE 'phpt:%x:kind-sem' is a semaphore, not a lock (server error or unexpected reply)
keys with read locks: Distlock\LockTimeoutException 500002: distlock: could not lock "phpt:%x:kind-read" and 1 more key within 1.000 seconds: 'phpt:%x:kind-read' (a key of the set) still held by another owner after 1000 ms
keys with read locks, try: NULL
bool(true)
int(2)
int(1)
int(0)
bool(true)
bool(true)
bool(true)
