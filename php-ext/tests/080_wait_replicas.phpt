--TEST--
distlock: WAIT for replicas (distlock.wait_replicas / wait_timeout_ms, Client options): granted when the replica acknowledges, fail-closed when it is stopped; the client cache keeps the settings apart
--EXTENSIONS--
distlock
redis
posix
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REPL')) die('skip DISTLOCK_TEST_REPL not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
[$mport, $rport, $rpid] = array_map('intval', explode(' ', getenv('DISTLOCK_TEST_REPL')));
$master = "redis://127.0.0.1:$mport";
$replica = dl_test_phpredis("redis://127.0.0.1:$rport");
$k = dl_test_key('wait');

// INI, for the compat functions: the key is on the replica when the call returns.
ini_set('distlock.servers', $master);
ini_set('distlock.wait_replicas', '1');
ini_set('distlock.wait_timeout_ms', '5000');  // generous where the replica is alive (a loaded box)
$t = distributedLock($k, 30);
var_dump($replica->get($k) === $t);
var_dump(distributedUnlock($k, $t));

// Constructor options.
$c = new Distlock\Client($master, ['wait_replicas' => 1, 'wait_timeout_ms' => 5000]);
$l = $c->tryLock($k, 30);
var_dump($replica->get($k) === $l->token());
var_dump($l->release());
try { new Distlock\Client($master, ['wait_replicas' => 'one']); }
catch (Distlock\ConfigurationException $e) { echo get_class($e), ": ", $e->getMessage(), "\n"; }
try { (new Distlock\Client($master, ['wait_replicas' => -1]))->tryLock($k, 30); }
catch (Exception $e) { echo get_class($e), ": ", str_contains($e->getMessage(), 'out of range 0..64') ? 'range named' : $e->getMessage(), "\n"; }

// Replica stopped: fail-closed, with the node and the count in the message.
posix_kill($rpid, SIGSTOP);
$c = new Distlock\Client($master, ['wait_replicas' => 1, 'wait_timeout_ms' => 100]);
try {
    $t0 = microtime(true);
    $c->tryLock($k, 30);
    echo "no exception\n";
} catch (Exception $e) {
    $took = microtime(true) - $t0;
    echo get_class($e), "\n";
    var_dump(str_contains($e->getMessage(), "$master: 0 of 1 replicas acknowledged within 100 ms"));
    var_dump($took >= 0.1 && $took < 1.6);
}
// Nothing left on the master (undone).
var_dump((bool)dl_test_phpredis($master)->exists($k));
// Same servers without WAIT: another cached client, granted on the master alone.
ini_set('distlock.wait_replicas', '0');
$t = distributedLock($k, 30);
var_dump(is_string($t) && $t !== '');
var_dump(distributedUnlock($k, $t));
posix_kill($rpid, SIGCONT);
?>
--EXPECTF--
bool(true)
bool(true)
bool(true)
bool(true)
Distlock\ConfigurationException: distlock: invalid client option: option "wait_replicas" takes an integer, got "one"
Distlock\ConfigurationException: range named
Distlock\AcquireException
bool(true)
bool(true)
bool(false)
bool(true)
bool(true)
