--TEST--
distlock OO: a pcntl signal handler (pcntl_async_signals) that throws for a signal that arrived while tryLock() or trySemaphore() was on the wire ends the call with its exception and nothing held: no Lock is kept alive, unreachable, until the request ends
--EXTENSIONS--
distlock
redis
pcntl
posix
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
require __DIR__ . '/fixtures/common.inc';
$uri = dl_test_uri();
$r = dl_test_phpredis();
$c = new Client($uri, ['command_timeout_ms' => 20000]);
pcntl_async_signals(true);

final class JobTimedOut extends Exception {}

/* The server holds write commands for 2 s (CLIENT PAUSE WRITE): the attempt
 * waits for its reply, and a child sends SIGUSR1 once it sees this
 * process's command blocked there. The handler throws when the reply has
 * come back with the grant. */
function throws_on_the_wire(string $name, Client $c, string $key, callable $try): void
{
    $r = dl_test_phpredis();
    $parent = getmypid();
    $c->holder($key);   // connected: the paused command is the attempt's
    $r->rawCommand('CLIENT', 'PAUSE', '2000', 'WRITE');
    $pid = pcntl_fork();
    if ($pid === 0) {
        $rr = dl_test_phpredis();
        $seen = dl_test_wait_for(fn() => preg_match('/ flags=\S*b\S* /', (string) $rr->rawCommand('CLIENT', 'LIST')) === 1, 10.0);
        posix_kill($parent, SIGUSR1);
        exit($seen ? 0 : 2);
    }
    pcntl_signal(SIGUSR1, function () { throw new JobTimedOut('job timed out'); });
    try {
        $l = $try();
        echo "$name: returned ", $l === null ? 'null' : 'a Lock';
    } catch (JobTimedOut $e) {
        echo "$name: threw ", get_class($e);
    }
    pcntl_waitpid($pid, $status);
    pcntl_signal(SIGUSR1, SIG_DFL);
    echo ', child exit ', pcntl_wexitstatus($status), ', key left held: ',
         var_export($r->exists($key) === 1, true), "\n";
}

$k = dl_test_key('wire-throw-lock');
throws_on_the_wire('tryLock', $c, $k, fn() => $c->tryLock($k, 30));
$k = dl_test_key('wire-throw-sem');
throws_on_the_wire('trySemaphore', $c, $k, fn() => $c->trySemaphore($k, 1, 30));
?>
--EXPECT--
tryLock: threw JobTimedOut, child exit 0, key left held: false
trySemaphore: threw JobTimedOut, child exit 0, key left held: false
