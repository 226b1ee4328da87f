--TEST--
distlock compat: generated token, 500002 with the seed's default text, unlock true then 1
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
$key = dl_test_key('basic');

// Defaults: ttl 60 s, a generated token (ours: 32 hex chars from the CSPRNG, a string).
$tok = distributedLock($key);
var_dump(is_string($tok), (bool)preg_match('/^[0-9a-f]{32}$/', $tok));
var_dump($r->get($key) === $tok);
$pttl = $r->pttl($key);
var_dump($pttl > 59000 && $pttl <= 60000);

// Two generated tokens differ.
$key2 = dl_test_key('basic2');
$tok2 = distributedLock($key2, 5);
var_dump($tok2 !== $tok);
var_dump(distributedUnlock($key2, $tok2));

// Held: \Exception, code 500002, the seed's text built from $ttl; nothing changes in Redis.
try {
    distributedLock($key, 300);
    echo "no exception\n";
} catch (Exception $e) {
    var_dump(get_class($e), $e->getCode(), $e->getMessage());
}
var_dump($r->get($key) === $tok);

// $tipMsg replaces the text.
try {
    distributedLock($key, 60, null, '订单正在处理');
} catch (Exception $e) {
    var_dump($e->getMessage(), $e->getCode());
}

// Wrong token: 1, and the lock stays.
var_dump(distributedUnlock($key, 'not-the-token'));
var_dump(distributedUnlock($key));
var_dump($r->get($key) === $tok);

// Right token: true, key gone; again: 1.
var_dump(distributedUnlock($key, $tok));
var_dump($r->exists($key));
var_dump(distributedUnlock($key, $tok));

// Free again: a new lock succeeds.
$tok3 = distributedLock($key, 1);
var_dump($r->pttl($key) <= 1000);
var_dump(distributedUnlock($key, $tok3));
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
string(9) "Exception"
int(500002)
string(66) "请求过于频繁,相同业务单号300秒内仅允许请求1次!"
bool(true)
string(18) "订单正在处理"
int(500002)
int(1)
int(1)
bool(true)
bool(true)
int(0)
int(1)
bool(true)
bool(true)
