--TEST--
distlock OO: the permit, read lock or keys of a SIGKILLed holder come back when their TTL ends (not before)
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
$c = new Client($uri);

/* A child takes the lease with $take (TTL 1 s) and dies by SIGKILL holding
 * it: nothing releases it. Then $try fails at once, and $wait gets it when the
 * TTL ends: after about 1 s from the child's grant, well before its timeout. */
function killed(string $name, string $uri, callable $take, callable $try, callable $wait): void
{
    $pid = pcntl_fork();
    if ($pid === 0) {
        $held = $take(new Client($uri));
        posix_kill(posix_getpid(), $held ? SIGKILL : SIGTERM);
        exit(1);
    }
    $t0 = microtime(true);
    pcntl_waitpid($pid, $status);
    $killed = pcntl_wifsignaled($status) && pcntl_wtermsig($status) === SIGKILL;
    $refused = $try() === null;
    $l = $wait();
    $el = microtime(true) - $t0;
    echo "$name: killed ", var_export($killed, true), ', refused while its TTL runs ',
         var_export($refused, true), ', back after the TTL ', var_export($el > 0.5 && $el < 5.0, true),
         ', released ', var_export($l->release(), true), "\n";
}

$k = dl_test_key('killed-sem');
killed('permit', $uri,
       fn($cc) => $cc->trySemaphore($k, 1, 1.0),
       fn() => $c->trySemaphore($k, 1, 10),
       fn() => $c->semaphore($k, 1, 10, 10.0));

$k = dl_test_key('killed-reader');
killed('read lock', $uri,
       fn($cc) => $cc->tryLock($k, 1.0, Client::SHARED),
       fn() => $c->tryLock($k, 10),
       fn() => $c->lock($k, 10, 10.0));

$ks = [dl_test_key('killed-many-a'), dl_test_key('killed-many-b')];
killed('keys', $uri,
       fn($cc) => $cc->tryLockMany($ks, 1.0),
       fn() => $c->tryLockMany([$ks[1]], 10),
       fn() => $c->lockMany($ks, 10, 10.0));
?>
--EXPECT--
permit: killed true, refused while its TTL runs true, back after the TTL true, released true
read lock: killed true, refused while its TTL runs true, back after the TTL true, released true
keys: killed true, refused while its TTL runs true, back after the TTL true, released true
