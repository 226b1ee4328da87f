--TEST--
distlock: a server reply that quotes the AUTH arguments (AUTH renamed away) shows no password in the exception
--EXTENSIONS--
distlock
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
// Redis answers a command it does not know with "ERR unknown command
// 'AUTH', with args beginning with: 'user' 'PASSWORD'": a server started
// with `rename-command AUTH ""` quotes the password the client sent.
$port = dl_test_free_port();
$dir = sys_get_temp_dir() . '/dl-authecho-' . getmypid();
@mkdir($dir);
$p = proc_open(['redis-server', '--port', (string)$port, '--bind', '127.0.0.1', '--save', '',
                '--dir', $dir, '--logfile', "$dir/redis.log", '--rename-command', 'AUTH', ''],
               [0 => ['pipe', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
$up = dl_test_wait_for(function () use ($port) {
    $s = @fsockopen('127.0.0.1', $port);
    if (!$s) return false;
    fwrite($s, "PING\r\n");
    $ok = fgets($s) === "+PONG\r\n";
    fclose($s);
    return $ok;
}, 10);
var_dump($up);
foreach (["dlu:S3CRETPW9", ":S3CRETPW9"] as $userinfo) {
    $c = new Distlock\Client("redis://$userinfo@127.0.0.1:$port");
    try {
        $c->tryLock('authecho', 30);
        echo "acquired?\n";
    } catch (Distlock\Exception $e) {
        echo get_class($e), "\n";
        echo str_replace((string)$port, 'PORT', $e->getMessage()), "\n";
        var_dump(str_contains($e->getMessage(), 'S3CRETPW9'));
    }
}
proc_terminate($p, 9);
proc_close($p);
@unlink("$dir/redis.log");
@rmdir($dir);
?>
--EXPECTF--
bool(true)
%s
%s
bool(false)
%s
%s
bool(false)
