--TEST--
distlock: one persistent connection per php-cgi worker across many FastCGI requests (workers forked by the master)
--EXTENSIONS--
distlock
redis
posix
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS') || !getenv('DISTLOCK_EXT_SO')) die('skip DISTLOCK_TEST_REDIS / DISTLOCK_EXT_SO not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
require __DIR__ . '/fixtures/fcgi.inc';
$r = dl_test_phpredis();
$connections = fn() => (int)$r->info('stats')['total_connections_received'];

$script = sys_get_temp_dir() . '/distlock-cgi-' . getmypid() . '.php';
file_put_contents($script, <<<'PHP'
<?php
$k = 'phpt:cgi:' . getmypid() . ':' . mt_rand();
$t = distributedLock($k, 30);
$u = distributedUnlock($k, $t);
$again = distributedUnlock($k, $t);
echo getmypid(), ' ', strlen($t), ' ', var_export($u, true), ' ', var_export($again, true);
PHP);

[$proc, $port] = fcgi_start(2, ['distlock.servers' => dl_test_uri()]);
$before = $connections();
$pids = [];
$bad = 0;
for ($i = 0; $i < 60; $i++) {
    $out = fcgi_request($port, $script);
    if (!preg_match('/^(\d+) 32 true 1$/', $out, $m)) {
        $bad++;
        echo "unexpected response: $out\n";
        continue;
    }
    $pids[$m[1]] = true;
}
$after = $connections();
fcgi_stop($proc);
unlink($script);

echo "bad responses: $bad\n";
var_dump(count($pids) >= 1 && count($pids) <= 2);
// 60 requests, 3 Redis commands each, but only one new connection per worker.
echo 'new connections <= workers: ', var_export($after - $before <= count($pids), true), "\n";
var_dump($after - $before >= 1);
?>
--EXPECT--
bad responses: 0
bool(true)
new connections <= workers: true
bool(true)
