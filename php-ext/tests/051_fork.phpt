--TEST--
distlock: after fork() parent and child each use their own connection; a child's exit neither breaks the parent's connection nor releases its locks
--EXTENSIONS--
distlock
redis
pcntl
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
ini_set('distlock.servers', dl_test_uri());
$r = dl_test_phpredis();
$connections = fn() => (int)$r->info('stats')['total_connections_received'];

// The parent connects (compat functions and an OO lock on the same INI client).
$t = distributedLock(dl_test_key('fork-warm'), 30);
var_dump(distributedUnlock(dl_test_key('fork-warm'), $t));
$client = new Distlock\Client();
$held = $client->tryLock(dl_test_key('fork-held'), 30);
var_dump($held instanceof Distlock\Lock);
$before = $connections();

// Parent and child hammer the same inherited client at the same time. Had they
// shared the socket, replies would cross and results would be wrong.
$pid = pcntl_fork();
if ($pid === 0) {
    // The inherited Lock is the parent's: the child cannot release it.
    $closed = false;
    try { $held->release(); } catch (Distlock\Exception $e) { $closed = $e->getCode() === Distlock\Exception::CLOSED; }
    if (!$closed) { exit(2); }
    $ok = 0;
    for ($i = 0; $i < 300; $i++) {
        $k = dl_test_key("fork-child-$i");
        $tok = distributedLock($k, 30);
        if (is_string($tok) && distributedUnlock($k, $tok) === true && distributedUnlock($k, $tok) === 1) {
            $ok++;
        }
    }
    exit($ok === 300 ? 0 : 1);   // normal shutdown: frees the inherited client and the inherited Lock
}
$ok = 0;
for ($i = 0; $i < 300; $i++) {
    $k = dl_test_key("fork-parent-$i");
    $tok = distributedLock($k, 30);
    if (is_string($tok) && distributedUnlock($k, $tok) === true && distributedUnlock($k, $tok) === 1) {
        $ok++;
    }
}
pcntl_waitpid($pid, $status);
echo "parent ok: $ok\n";
echo 'child exit: ', pcntl_wexitstatus($status), "\n";

// The child's exit did not release the parent's lock ...
var_dump($r->get(dl_test_key('fork-held')) === $held->token(), $held->isHeld());
// ... nor close the parent's connection: it still works, without reconnecting.
$t = distributedLock(dl_test_key('fork-after'), 30);
var_dump(distributedUnlock(dl_test_key('fork-after'), $t));
echo 'new connections: ', $connections() - $before, "\n";
var_dump($held->release());
?>
--EXPECT--
bool(true)
bool(true)
parent ok: 300
child exit: 0
bool(true)
bool(true)
bool(true)
new connections: 1
bool(true)
