--TEST--
distlock: Redlock over three servers that all restart between two requests: the next call works
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
$dir = sys_get_temp_dir() . '/distlock-restart3-' . getmypid();
@mkdir($dir);
$start = function (int $port) use ($dir) {
    $p = proc_open(['redis-server', '--port', (string)$port, '--bind', '127.0.0.1', '--save', '',
                    '--appendonly', 'no', '--dir', $dir],
                   [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
    $up = dl_test_wait_for(function () use ($port) {
        try { $r = new Redis(); $r->connect('127.0.0.1', $port, 0.2); return $r->ping() == true; }
        catch (RedisException $e) { return false; }
    }, 10.0);
    if (!$up) { throw new RuntimeException("redis-server did not start on $port"); }
    return $p;
};
$stop = function ($p) {
    proc_terminate($p, SIGKILL);
    dl_test_wait_for(fn() => !proc_get_status($p)['running'], 10.0);
    proc_close($p);
};
$ports = [dl_test_free_port(), dl_test_free_port(), dl_test_free_port()];
$ports = array_values(array_unique($ports));
while (count($ports) < 3) { $ports[] = dl_test_free_port(); $ports = array_values(array_unique($ports)); }
$servers = [];
foreach ($ports as $p) { $servers[$p] = $start($p); }
register_shutdown_function(function () use (&$servers, $stop, $dir) {
    foreach ($servers as $s) { $stop($s); }
    @rmdir($dir);
});
ini_set('distlock.servers', implode(',', array_map(fn($p) => "redis://127.0.0.1:$p", $ports)));
$client = new Distlock\Client();
$k = dl_test_key('restart3');

$t = distributedLock($k, 30);
var_dump(distributedUnlock($k, $t));
var_dump($client->tryLock($k, 30)->release());

// All three restart while the worker is idle.
foreach ($ports as $p) { $stop($servers[$p]); $servers[$p] = $start($p); }

$t = distributedLock($k, 30);
var_dump(is_string($t));
$n = 0;
foreach ($ports as $p) { $n += (int)(dl_test_phpredis("redis://127.0.0.1:$p")->get($k) === $t); }
var_dump($n >= 2);
var_dump(distributedUnlock($k, $t));
var_dump($client->tryLock($k, 30)->release());
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
