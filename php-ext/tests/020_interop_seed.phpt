--TEST--
distlock compat: the seed's userland class (phpredis) and the extension exclude each other and release each other's locks
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/seed_userland.php';
require __DIR__ . '/fixtures/erp_counter.php';
ini_set('distlock.servers', dl_test_uri());
$seed = new Seed_RequestCounter();
$ext = new Process_RequestCounter();
$r = dl_test_phpredis();

// 1. The seed locks: the extension is excluded, with the seed's exception.
$k = dl_test_key('seed-first');
$seedTok = $seed->distributedLock($k, 300);
var_dump(is_int($seedTok));
try { $ext->distributedLock($k, 300); echo "ext got it\n"; }
catch (Exception $e) { echo get_class($e), ' ', $e->getCode(), ' ', $e->getMessage(), "\n"; }
// The extension cannot release it with a wrong token, and releases it with the seed's.
var_dump($ext->distributedUnlock($k, $seedTok + 1));
var_dump($r->get($k) === (string)$seedTok);
var_dump($ext->distributedUnlock($k, $seedTok));
var_dump($r->exists($k));

// 2. The extension locks: the seed is excluded, with the same exception.
$k = dl_test_key('ext-first');
$extTok = $ext->distributedLock($k, 300);
try { $seed->distributedLock($k, 300); echo "seed got it\n"; }
catch (Exception $e) { echo get_class($e), ' ', $e->getCode(), ' ', $e->getMessage(), "\n"; }
var_dump($seed->distributedUnlock($k, 'wrong'));
var_dump($r->get($k) === $extTok);
var_dump($seed->distributedUnlock($k, $extTok));
var_dump($r->exists($k));

// 3. Same explicit int token on both sides: identical bytes on the wire.
$k = dl_test_key('same-int');
var_dump($seed->distributedLock($k, 60, 777));
try { $ext->distributedLock($k, 60, 777); echo "ext got it\n"; }
catch (Exception $e) { var_dump($e->getCode()); }
var_dump($ext->distributedUnlock($k, 777));
var_dump($ext->distributedLock($k, 60, 777));
try { $seed->distributedLock($k, 60, 777); echo "seed got it\n"; }
catch (Exception $e) { var_dump($e->getCode()); }
var_dump($seed->distributedUnlock($k, 777));
var_dump($r->exists($k));

// 4. Results are identical value for value: unlock of a free key, double unlock.
$k = dl_test_key('results');
var_dump($seed->distributedUnlock($k, 1) === $ext->distributedUnlock($k, 1));
$t = $ext->distributedLock($k, 60);
var_dump($ext->distributedUnlock($k, $t) === true);
var_dump($ext->distributedUnlock($k, $t) === $seed->distributedUnlock($k, $t));
?>
--EXPECT--
bool(true)
Exception 500002 请求过于频繁,相同业务单号300秒内仅允许请求1次!
int(1)
bool(true)
bool(true)
int(0)
Exception 500002 请求过于频繁,相同业务单号300秒内仅允许请求1次!
int(1)
bool(true)
bool(true)
int(0)
int(777)
int(500002)
bool(true)
int(777)
int(500002)
bool(true)
int(0)
bool(true)
bool(true)
bool(true)
