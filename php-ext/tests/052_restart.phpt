--TEST--
distlock: the persistent connection recovers after the Redis server restarts (and its script cache is gone)
--EXTENSIONS--
distlock
redis
posix
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
$port = dl_test_free_port();
$dir = sys_get_temp_dir() . '/distlock-restart-' . getmypid();
@mkdir($dir);
$start = function () use ($port, $dir) {
    $p = proc_open(['redis-server', '--port', (string)$port, '--bind', '127.0.0.1', '--save', '',
                    '--appendonly', 'no', '--dir', $dir],
                   [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
    $up = dl_test_wait_for(function () use ($port) {
        try { $r = new Redis(); $r->connect('127.0.0.1', $port, 0.2); return $r->ping() == true; }
        catch (RedisException $e) { return false; }
    }, 10.0);
    if (!$up) { throw new RuntimeException('redis-server did not start'); }
    return $p;
};
$stop = function ($p) {
    proc_terminate($p, SIGKILL);
    dl_test_wait_for(fn() => !proc_get_status($p)['running'], 10.0);
    proc_close($p);
};
$server = $start();
register_shutdown_function(function () use (&$server, $stop, $dir) {
    if ($server) { $stop($server); }
    @rmdir($dir);
});
ini_set('distlock.servers', "redis://127.0.0.1:$port");
$k = dl_test_key('restart');

$t = distributedLock($k, 30);
var_dump(distributedUnlock($k, $t));

// Server dies: a clear ConnectionException, not a hang.
$stop($server);
$server = null;
try { distributedLock($k, 30); echo "no exception\n"; }
catch (Distlock\ConnectionException $e) { echo get_class($e), "\n"; }

// Back on the same port, empty (no scripts cached): the next calls just work.
$server = $start();
$t = distributedLock($k, 30);
var_dump(is_string($t));
try { distributedLock($k, 30); echo "no exception\n"; }
catch (Exception $e) { var_dump($e->getCode()); }
var_dump(distributedUnlock($k, $t));

// Restart while idle (the worker between two requests): the first call works.
$stop($server);
$server = $start();
$t = distributedLock($k, 30);
var_dump(is_string($t), distributedUnlock($k, $t));

// A silent node (SIGSTOP: the kernel still accepts connections, nobody answers)
// costs one timeout: the core resends only on an established connection that broke.
ini_set('distlock.connect_timeout_ms', '300');
ini_set('distlock.command_timeout_ms', '300');
$pid = proc_get_status($server)['pid'];
posix_kill($pid, SIGSTOP);
$t0 = microtime(true);
try { distributedLock($k, 30); echo "no exception\n"; }
catch (Distlock\ConnectionException $e) { echo get_class($e), "\n"; }
$el = microtime(true) - $t0;
var_dump($el >= 0.25 && $el < 0.55 ? 'one timeout' : $el);
posix_kill($pid, SIGCONT);
?>
--EXPECT--
bool(true)
Distlock\AcquireException
bool(true)
int(500002)
bool(true)
bool(true)
bool(true)
Distlock\AcquireException
string(11) "one timeout"
