--TEST--
distlock OO: a Lock destroyed while held releases it (unset, scope end, a temporary, request end), auto-renewed or not; distributedLock()'s token is not tied to any object
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
$c = new Client($uri);

echo "-- unset\n";
$k = dl_test_key('unset');
$l = $c->tryLock($k, 30);
var_dump($r->get($k) === $l->token());
unset($l);
var_dump($r->exists($k));

echo "-- end of the function that holds it\n";
function hold(Client $c, string $k, Redis $r): bool { $l = $c->tryLock($k, 30); return $r->exists($k) === 1; }
$k = dl_test_key('scope');
var_dump(hold($c, $k, $r), $r->exists($k));

echo "-- a temporary is destroyed after the condition: keep the Lock in a variable\n";
$k = dl_test_key('temp');
if ($c->tryLock($k, 30)) { var_dump($r->exists($k)); }
if ($l = $c->tryLock($k, 30)) { var_dump($r->exists($k)); }
unset($l);
var_dump($r->exists($k));

echo "-- auto-renewed: released too\n";
$k = dl_test_key('renew');
$l = $c->tryLock($k, 0.3, Client::AUTO_RENEW);
var_dump($r->get($k) === $l->token());
unset($l);
var_dump($r->exists($k));

echo "-- end of the request (a child php process that exits holding it)\n";
$k = dl_test_key('request');
$php = getenv('TEST_PHP_EXECUTABLE') ?: PHP_BINARY;
$p = proc_open([$php, '-n', '-d', 'extension=' . getenv('DISTLOCK_EXT_SO'), '-r',
                '$l = (new Distlock\Client($argv[1]))->tryLock($argv[2], 30); echo $l ? "held\n" : "not held\n";',
                $uri, $k], [1 => ['pipe', 'w']], $pipes);
echo stream_get_contents($pipes[1]);
var_dump(proc_close($p), $r->exists($k));

echo "-- distributedLock(): the token is the caller's, the key stays until its TTL or distributedUnlock()\n";
ini_set('distlock.servers', $uri);
$k = dl_test_key('compat');
$token = distributedLock($k, 30);
gc_collect_cycles();
var_dump($r->get($k) === $token, $r->pttl($k) > 29000);
var_dump(distributedUnlock($k, $token), $r->exists($k));
?>
--EXPECT--
-- unset
bool(true)
int(0)
-- end of the function that holds it
bool(true)
int(0)
-- a temporary is destroyed after the condition: keep the Lock in a variable
int(0)
int(1)
int(0)
-- auto-renewed: released too
bool(true)
int(0)
-- end of the request (a child php process that exits holding it)
held
int(0)
int(0)
-- distributedLock(): the token is the caller's, the key stays until its TTL or distributedUnlock()
bool(true)
bool(true)
bool(true)
int(0)
