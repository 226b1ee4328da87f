--TEST--
distlock OO: a request that dies of a fatal error in a pcntl signal handler as its lock() wait is granted leaves the key free for the next request of the same php-cgi process (-T 2): the lock won is not kept held past the request
--EXTENSIONS--
distlock
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS') || !getenv('DISTLOCK_EXT_SO')) die('skip DISTLOCK_TEST_REDIS / DISTLOCK_EXT_SO not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
$uri = dl_test_uri();
$key = dl_test_key('fatal-at-grant');
$script = sys_get_temp_dir() . '/distlock-fatal-at-grant-' . getmypid() . '.php';
// Request 1 holds $key, waits for it in lock() on another client, and is
// sent SIGHUP once it waits (a child polls the key's channel with a
// deadline); SIGHUP's handler raises SIGUSR1, whose handler lets the holder
// go and raises SIGUSR2, whose handler is a fatal error: it runs as the wait
// wins. Request 2, in the same process, says who holds $key.
file_put_contents($script, <<<'PHP'
<?php
use Distlock\Client;
[$uri, $key] = [getenv('DL_URI'), getenv('DL_KEY')];
$c = new Client($uri, ['retry_min_ms' => 30000, 'retry_max_ms' => 30000]);
$h = $c->holder($key);
if ($h['taken'] > 0 || file_exists(getenv('DL_MARK'))) {
    echo 'request 2: key held: ', var_export($h['held'], true), "\n";
    return;
}
touch(getenv('DL_MARK'));
function numsub(string $hostport, string $channel): int
{
    $s = stream_socket_client("tcp://$hostport", $errno, $errstr, 5.0);
    fwrite($s, "*3\r\n$6\r\nPUBSUB\r\n$6\r\nNUMSUB\r\n$" . strlen($channel) . "\r\n$channel\r\n");
    // *2 $len channel :count
    $reply = '';
    while (substr_count($reply, "\r\n") < 4 && !feof($s)) {
        $reply .= fread($s, 512);
    }
    fclose($s);
    return (int)substr(explode("\r\n", $reply)[3] ?? ':0', 1);
}
$holder = (new Client($uri, ['retry_min_ms' => 100]))->tryLock($key, 30);
pcntl_async_signals(true);
$parent = getmypid();
if (pcntl_fork() === 0) {
    $hostport = parse_url($uri, PHP_URL_HOST) . ':' . parse_url($uri, PHP_URL_PORT);
    $end = microtime(true) + 10.0;
    while (numsub($hostport, "distlock:$key") < 1 && microtime(true) < $end) {
        usleep(5000);
    }
    posix_kill($parent, SIGHUP);
    // exit() would end only this request: php-cgi -T would go on to run
    // request 2 in the child too.
    posix_kill(getmypid(), SIGKILL);
}
pcntl_signal(SIGHUP, function () { posix_kill(getmypid(), SIGUSR1); });
pcntl_signal(SIGUSR1, function () use (&$holder) {
    $holder->release();
    $holder = null;
    posix_kill(getmypid(), SIGUSR2);
});
pcntl_signal(SIGUSR2, function () { trigger_error('the job timed out', E_USER_ERROR); });
$l = $c->lock($key, 30, 20.0);
echo "request 1: not ended by the handler\n";
PHP);
$cmd = ['php-cgi', '-n', '-q', '-T', '2', '-d', 'extension=' . getenv('DISTLOCK_EXT_SO'),
        '-d', 'extension=posix', '-d', 'display_errors=1', '-d', 'html_errors=0', $script];
$env = ['DL_URI' => $uri, 'DL_KEY' => $key, 'DL_MARK' => "$script.mark", 'PATH' => getenv('PATH')];
$p = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $env);
$out = stream_get_contents($pipes[1]);
stream_get_contents($pipes[2]);
proc_close($p);
@unlink($script);
@unlink("$script.mark");
preg_match_all('/^(request \d: .*|.*Fatal error: .*?) in /m', $out, $m);
preg_match('/^request 2: .*$/m', $out, $second);
echo preg_match('/Fatal error: the job timed out/', $out) ? "request 1: fatal error in the handler\n" : "request 1: no fatal error\n";
echo $second[0] ?? 'request 2: no answer', "\n";
(new Distlock\Client($uri))->forceRelease($key);
?>
--EXPECT--
request 1: fatal error in the handler
request 2: key held: false
