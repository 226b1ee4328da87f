--TEST--
distlock compat: bad arguments get a clear error and set nothing in Redis
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
ini_set('distlock.servers', dl_test_uri());
$r = dl_test_phpredis();
$r->flushAll();

$k = dl_test_key('bad');
$cases = [
    'empty key'      => fn() => distributedLock(),
    'empty key 2'    => fn() => distributedLock('', 60),
    'NUL in key'     => fn() => distributedLock("a\0b"),
    'key too long'   => fn() => distributedLock(str_repeat('k', 1025)),
    'ttl 0'          => fn() => distributedLock($k, 0),
    'ttl -1'         => fn() => distributedLock($k, -1),
    'ttl huge'       => fn() => distributedLock($k, 2147484),
    'ttl PHP_INT_MAX'=> fn() => distributedLock($k, PHP_INT_MAX),
    'token too long' => fn() => distributedLock($k, 60, str_repeat('t', 257)),
    'NUL in token'   => fn() => distributedLock($k, 60, "to\0ken"),
    'ttl array'      => fn() => distributedLock($k, []),
    'random array'   => fn() => distributedLock($k, 60, [1]),
    'ttl not numeric'=> fn() => distributedLock($k, 'sixty'),
    'unlock empty'   => fn() => distributedUnlock(),
    'unlock NUL key' => fn() => distributedUnlock("a\0b", 'x'),
    'unlock NUL tok' => fn() => distributedUnlock($k, "x\0y"),
    'unlock null'    => fn() => distributedUnlock($k, null),
];
foreach ($cases as $name => $f) {
    try {
        $f();
        echo "$name: no error\n";
    } catch (Throwable $e) {
        echo "$name: ", get_class($e), ': ', $e->getMessage(), "\n";
    }
}
// Nothing was written.
var_dump($r->dbSize());

// Edge values that are valid: 1 s and the largest TTL; a 1024-byte key.
$t = distributedLock($k, 1);
var_dump($r->pttl($k) <= 1000, distributedUnlock($k, $t));
$t = distributedLock($k, 2147483);
var_dump($r->ttl($k) > 2147000, distributedUnlock($k, $t));
$long = str_repeat('k', 1024);
$t = distributedLock($long, 5);
var_dump($r->get($long) === $t, distributedUnlock($long, $t));
// An empty token never matches anything: 1 without touching Redis.
var_dump(distributedUnlock($k, ''));
var_dump($r->dbSize());
?>
--EXPECTF--
empty key: ValueError: distributedLock(): Argument #1 ($key) must not be empty
empty key 2: ValueError: distributedLock(): Argument #1 ($key) must not be empty
NUL in key: ValueError: distributedLock(): Argument #1 ($key) must not contain any null bytes
key too long: ValueError: distributedLock(): Argument #1 ($key) must be at most 1024 bytes long
ttl 0: ValueError: distributedLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got 0
ttl -1: ValueError: distributedLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got -1
ttl huge: ValueError: distributedLock(): Argument #2 ($ttl) must be at most 2147483.647 seconds (DISTLOCK_TTL_MAX ms), got 2147484
ttl PHP_INT_MAX: ValueError: distributedLock(): Argument #2 ($ttl) must be at most 2147483.647 seconds (DISTLOCK_TTL_MAX ms), got 9.223372036854776e+18
token too long: ValueError: distributedLock(): Argument #3 ($random) must be at most 256 bytes long
NUL in token: ValueError: distributedLock(): Argument #3 ($random) must not contain any null bytes
ttl array: TypeError: distributedLock(): Argument #2 ($ttl) must be of type int|float, array given
random array: TypeError: distributedLock(): Argument #3 ($random) must be of type string|int|null, array given
ttl not numeric: TypeError: distributedLock(): Argument #2 ($ttl) must be of type int|float, string given
unlock empty: ValueError: distributedUnlock(): Argument #1 ($key) must not be empty
unlock NUL key: ValueError: distributedUnlock(): Argument #1 ($key) must not contain any null bytes
unlock NUL tok: ValueError: distributedUnlock(): Argument #2 ($random) must not contain any null bytes

Deprecated: distributedUnlock(): Passing null to parameter #2 ($random) of type string|int is deprecated in %s on line %d
unlock null: no error
int(0)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
int(1)
int(0)
