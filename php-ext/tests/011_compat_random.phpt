--TEST--
distlock compat: a given $random is used and returned as given (string or int); falsy ones generate
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

// int: returned as that int, stored as its decimal string (what phpredis sends).
$k = dl_test_key('int');
var_dump(distributedLock($k, 60, 1234567));
var_dump($r->get($k));
// The same explicit $random again still throws, as the seed's plain SET NX does.
try { distributedLock($k, 60, 1234567); echo "no exception\n"; }
catch (Exception $e) { var_dump($e->getCode()); }
var_dump(distributedUnlock($k, '1234567'));   // string form of the same token releases

// string: returned as given.
$k = dl_test_key('str');
var_dump(distributedLock($k, 60, 'order-42:worker-7'));
var_dump($r->get($k));
var_dump(distributedUnlock($k, 'order-42:worker-7'));

// A numeric string stays a string.
$k = dl_test_key('numstr');
var_dump(distributedLock($k, 60, '0042'));
var_dump($r->get($k));
var_dump(distributedUnlock($k, 42));      // int 42 is "42", not "0042": not ours
var_dump(distributedUnlock($k, '0042'));

// Negative int.
$k = dl_test_key('neg');
var_dump(distributedLock($k, 60, -5));
var_dump($r->get($k));
var_dump(distributedUnlock($k, -5));

// Falsy $random (null, 0, '', '0', false) generates a token, as `$random ? $random : mt_rand()` does.
foreach ([null, 0, '', '0', false] as $i => $falsy) {
    $k = dl_test_key("falsy$i");
    $t = distributedLock($k, 60, $falsy);
    echo var_export($falsy, true), ' -> ', (is_string($t) && preg_match('/^[0-9a-f]{32}$/', $t)) ? 'generated' : var_export($t, true), "\n";
    var_dump(distributedUnlock($k, $t));
}

// 256 bytes is the longest accepted token.
$k = dl_test_key('long');
$long = str_repeat('t', 256);
var_dump(distributedLock($k, 60, $long) === $long);
var_dump(distributedUnlock($k, $long));

// Keys are binary-safe apart from NUL: UTF-8 and spaces are fine.
$k = dl_test_key('订单 SO-001');
$t = distributedLock($k, 60);
var_dump($r->get($k) === $t);
var_dump(distributedUnlock($k, $t));
?>
--EXPECT--
int(1234567)
string(7) "1234567"
int(500002)
bool(true)
string(17) "order-42:worker-7"
string(17) "order-42:worker-7"
bool(true)
string(4) "0042"
string(4) "0042"
int(1)
bool(true)
int(-5)
string(2) "-5"
bool(true)
NULL -> generated
bool(true)
0 -> generated
bool(true)
'' -> generated
bool(true)
'0' -> generated
bool(true)
false -> generated
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
