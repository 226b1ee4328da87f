--TEST--
distlock compat: distributedLock() takes a float $ttl without a deprecation notice, rounded up to whole ms by the one TTL rule; the 500002 text shows it as PHP writes it
--EXTENSIONS--
distlock
redis
--INI--
error_reporting=E_ALL
display_errors=1
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
ini_set('distlock.servers', dl_test_uri());
$r = dl_test_phpredis();

// 10.9 s is 10900 ms on the server (an int parameter would have truncated it
// to 10 s after a "loses precision" deprecation).
$k = dl_test_key('compat-float');
$t = distributedLock($k, 10.9);
$p = $r->pttl($k);
var_dump($p > 10000 && $p <= 10900);
// Held: the seed's text writes $ttl as PHP's `.` does (10.9, not 10).
try { distributedLock($k, 10.9); } catch (Exception $e) { echo get_class($e), ' ', $e->getCode(), ' ', $e->getMessage(), "\n"; }
var_dump(distributedUnlock($k, $t));

// Rounded UP to whole ms: a float below a millisecond is 1 ms (truncated it
// would be 0, refused as "> 0"), which the core refuses by its clock-drift
// allowance, as Client::tryLock() does; 0.0, negatives and NAN by value.
foreach ([0.0001, 0.0, -2.5, NAN] as $ttl) {
    try { distributedLock($k, $ttl); echo "$ttl: taken\n"; }
    catch (Throwable $e) { echo get_class($e), ': ', $e->getMessage(), "\n"; }
}
// An int keeps its meaning and its text (60, not 60.0).
$t = distributedLock($k);
var_dump($r->ttl($k) > 58);
try { distributedLock($k); } catch (Exception $e) { echo $e->getMessage(), "\n"; }
var_dump(distributedUnlock($k, $t), $r->exists($k));
?>
--EXPECT--
bool(true)
Exception 500002 请求过于频繁,相同业务单号10.9秒内仅允许请求1次!
bool(true)
ValueError: distlock: distributedLock: ttl_ms 1 is not above the clock-drift allowance of 2 ms
ValueError: distributedLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got 0
ValueError: distributedLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got -2.5
ValueError: distributedLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got nan
bool(true)
请求过于频繁,相同业务单号60秒内仅允许请求1次!
bool(true)
int(0)
