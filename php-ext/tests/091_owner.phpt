--TEST--
distlock: owner metadata (distlock.owner_info / owner_label INI, Client options owner_info / owner_label): who holds the lock is in the hash {key}:owner with the lock's TTL, deleted on release; off by default; a label over 256 bytes is a configuration error
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
$uri = dl_test_uri();
$k = dl_test_key('owner');
$ok = '{' . $k . '}:owner';

// Off by default: only the lock key.
$c = new Client($uri);
$l = $c->tryLock($k, 30);
var_dump($r->exists($k), $r->exists($ok));
$l->release();

// Client options: the record, the lock's TTL, gone after release.
$label = "job \"42\"\n\x01 caf\xc3\xa9";
$c = new Client($uri, ['owner_label' => $label]);
$l = $c->tryLock($k, 30);
$h = $r->hGetAll($ok);
var_dump($h['token'] === $l->token(), $h['host'] === gethostname(), (int)$h['pid'] === getmypid(),
         $h['label'] === $label, abs((int)$h['since'] - (int)(microtime(true) * 1000)) < 60000);
$p = $r->pttl($ok);
var_dump($p > 20000 && $p <= 30000);
$l->extend(90);
var_dump($r->pttl($ok) > 60000);
$l->release();
var_dump($r->exists($ok));

// INI, for the compat functions.
ini_set('distlock.servers', $uri);
ini_set('distlock.owner_info', '1');
$t = distributedLock($k, 30);
var_dump($r->hGet($ok, 'token') === $t, $r->hGet($ok, 'label'));
var_dump(distributedUnlock($k, $t), $r->exists($ok));
ini_set('distlock.owner_info', '0');

try { new Client($uri, ['owner_info' => 2]); }
catch (Distlock\ConfigurationException $e) { echo get_class($e), ": ", $e->getMessage(), "\n"; }
try { (new Client($uri, ['owner_label' => str_repeat('x', 257)]))->tryLock($k, 30); }
catch (Exception $e) { echo get_class($e), ": ", str_contains($e->getMessage(), 'at most 256') ? 'limit named' : $e->getMessage(), "\n"; }
var_dump($r->exists($k));
?>
--EXPECTF--
int(1)
int(0)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
int(0)
bool(true)
string(0) ""
bool(true)
int(0)
Distlock\ConfigurationException: distlock: invalid client option: option "owner_info": value 2 out of range 0..1
Distlock\ConfigurationException: limit named
int(0)
