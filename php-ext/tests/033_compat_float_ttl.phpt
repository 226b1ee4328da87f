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

// 1.5 s is 1500 ms on the server (an int parameter would have truncated it
// to 1 s after a "loses precision" deprecation).
$k = dl_test_key('compat-float');
$t = distributedLock($k, 1.5);
$p = $r->pttl($k);
var_dump($p > 1000 && $p <= 1500);
// Held: the seed's text writes $ttl as PHP's `.` does (1.5, not 1).
try { distributedLock($k, 1.5); } catch (Exception $e) { echo get_class($e), ' ', $e->getCode(), ' ', $e->getMessage(), "\n"; }
var_dump(distributedUnlock($k, $t));

// Rounded UP to whole ms (1.0005 s is 1001 ms), never down to 1000.
$t = distributedLock($k, 1.0005);
var_dump($r->pttl($k) > 1000, distributedUnlock($k, $t));
// A float below a millisecond is 1 ms: the core refuses it (the clock-drift
// allowance), as Client::tryLock() does; 0.0 and NAN are refused by value.
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
Exception 500002 请求过于频繁,相同业务单号1.5秒内仅允许请求1次!
bool(true)
bool(true)
bool(true)
ValueError: distlock: distributedLock: ttl_ms 1 is not above the clock-drift allowance of 2 ms
ValueError: distributedLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got 0
ValueError: distributedLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got -2.5
ValueError: distributedLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got nan
bool(true)
请求过于频繁,相同业务单号60秒内仅允许请求1次!
bool(true)
int(0)
