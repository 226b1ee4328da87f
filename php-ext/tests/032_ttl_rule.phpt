--TEST--
distlock: every TTL in seconds follows the library's one rule (rounded up to whole ms, 1 ms..DISTLOCK_TTL_MAX, ValueError naming the value)
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
ini_set('distlock.servers', dl_test_uri());
$c = new Client(dl_test_uri());
$k = 'phpt:ttl:' . bin2hex(random_bytes(6));

function show(string $what, callable $f): void
{
    try {
        $f();
        echo "$what: ok\n";
    } catch (Throwable $e) {
        echo "$what: ", get_class($e), ': ', $e->getMessage(), "\n";
    }
}

// 1.0005 s is 1001 ms: the lease on the server is no longer than that.
$l = $c->tryLock($k, 1.0005);
$p = $r->pttl($k);
var_dump($p > 500 && $p <= 1001);
$v = $l->extend(2.0000001);   // 2000.0001 ms -> 2001 ms
$p = $r->pttl($k);
var_dump($v > 1.9 && $p > 1500 && $p <= 2001);
$l->release();
// 0.0001 s is 1 ms (up, not 0): it reaches the library, which refuses a
// lease not above its clock-drift allowance.
show('0.0001', fn() => $c->tryLock($k, 0.0001));
// Refused by value, in the OO API ...
show('0', fn() => $c->tryLock($k, 0));
show('-1.5', fn() => $c->tryLock($k, -1.5));
show('NAN', fn() => $c->tryLock($k, NAN));
show('INF', fn() => $c->lock($k, INF));
show('2147483.648', fn() => $c->tryLock($k, 2147483.648));
$l = $c->tryLock($k, 2147483.647);
var_dump($r->pttl($k) > 2147000000);
show('extend -INF', fn() => $l->extend(-INF));
$l->release();
// ... and in the compat pair (whole seconds, as the seed).
show('compat 0', fn() => distributedLock($k, 0));
show('compat 2147484', fn() => distributedLock($k, 2147484));
$t = distributedLock($k, 2147483);
var_dump($r->pttl($k) > 2147000000, distributedUnlock($k, $t));
?>
--EXPECT--
bool(true)
bool(true)
0.0001: ValueError: distlock: lock: ttl_ms 1 is not above the clock-drift allowance of 2 ms
0: ValueError: Distlock\Client::tryLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got 0
-1.5: ValueError: Distlock\Client::tryLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got -1.5
NAN: ValueError: Distlock\Client::tryLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got nan
INF: ValueError: Distlock\Client::lock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got inf
2147483.648: ValueError: Distlock\Client::tryLock(): Argument #2 ($ttl) must be at most 2147483.647 seconds (DISTLOCK_TTL_MAX ms), got 2147483.648
bool(true)
extend -INF: ValueError: Distlock\Lock::extend(): Argument #1 ($ttl) must be a finite number of seconds > 0, got -inf
compat 0: ValueError: distributedLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got 0
compat 2147484: ValueError: distributedLock(): Argument #2 ($ttl) must be at most 2147483.647 seconds (DISTLOCK_TTL_MAX ms), got 2147484
bool(true)
bool(true)
