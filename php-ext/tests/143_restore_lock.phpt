--TEST--
distlock OO: Client::restoreLock() releases (explicitly only: a destroyed restored Lock keeps the key) and extends a lock another process took (abandoned Lock, distributedLock(), a caller's token) on 1 and 3 nodes; a wrong token deletes nothing; it is not known held until extended; bad keys and tokens are ValueErrors
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS') || !getenv('DISTLOCK_TEST_REDLOCK')) die('skip DISTLOCK_TEST_REDIS / DISTLOCK_TEST_REDLOCK not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
require __DIR__ . '/fixtures/common.inc';

function err(string $what, callable $f): void
{
    try { $f(); echo "$what: no error\n"; }
    catch (Throwable $e) { echo "$what: ", get_class($e), ' ', $e->getCode(), ': ', $e->getMessage(), "\n"; }
}

/** Run $code in another php process with the extension under test; its output. */
function child(string $code, string ...$args): string
{
    $cmd = array_merge([PHP_BINARY, '-n', '-d', 'extension=' . getenv('DISTLOCK_EXT_SO'), '-r', $code], $args);
    $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    $out = stream_get_contents($pipes[1]);
    $errs = stream_get_contents($pipes[2]);
    $rc = proc_close($p);
    if ($rc !== 0 || $errs !== '') {
        echo "child failed ($rc): $errs\n";
    }
    return $out;
}
$takeAndAbandon = '$c = new Distlock\Client($argv[1]); $l = $c->tryLock($argv[2], 30);'
                . ' echo $l->token(); $l->abandon();';

$cases = ['1 node' => [dl_test_uri()], '3 nodes' => dl_test_redlock()];
foreach ($cases as $name => $nodes) {
    echo "-- $name\n";
    $servers = implode(',', $nodes);
    $rs = array_map('dl_test_phpredis', $nodes);
    // The other process's lock is promised on a quorum only: its fresh
    // client's round may end before its last connection is ready.
    $quorum = intdiv(count($nodes), 2) + 1;
    $held = fn(string $k, string $t) => array_sum(array_map(fn($r) => (int)($r->get($k) === $t), $rs)) >= $quorum;
    // Nodes still holding the key after a release: a release returns once a
    // quorum deleted it, the last node's delete may still be on its way.
    $count = fn(string $k) => array_sum(array_map(fn($r) => $r->exists($k), $rs));
    $left = fn(string $k) => dl_test_wait_for(fn() => $count($k) === 0, 3.0) ? 0 : $count($k);
    $c = new Client($servers);
    $k = dl_test_key("restore-$name");

    // Another process took the key and exited without releasing it.
    $tok = child($takeAndAbandon, $servers, $k);
    var_dump(strlen($tok), $held($k, $tok));
    // A wrong token restores a Lock (no I/O) whose release deletes nothing.
    $wrong = $c->restoreLock($k, 'not-the-owner');
    var_dump($wrong->isHeld(), $wrong->validity(), $wrong->fence(), $wrong->release());
    var_dump($held($k, $tok));
    err('extend wrong', fn() => $wrong->extend(5));
    // The right token: not known held until extended, then held with a fresh TTL.
    $l = $c->restoreLock($k, $tok);
    var_dump($l->key() === $k, $l->token() === $tok, $l->isHeld(), $l->isLost(), $l->validity());
    err('check', fn() => $l->check());
    err('extend()', fn() => $l->extend());
    $v = $l->extend(20);
    var_dump($v > 15 && $v <= 20, $l->isHeld(), count(array_filter($rs, fn($r) => $r->pttl($k) > 15000)) >= $quorum);
    var_dump($l->extend() > 15);    // now the last extend's TTL
    // Its release deletes the other process's lock on every node.
    var_dump($l->release(), $left($k), $l->isHeld());
    var_dump($l->release());

    // A restored Lock is never released implicitly (its token may be another
    // process's lock still in use): abandoned or destroyed, also once an
    // extend() made it known held, it keeps the key; only release() deletes.
    $tok = child($takeAndAbandon, $servers, $k);
    $l = $c->restoreLock($k, $tok);
    $l->abandon();
    unset($l);
    var_dump($held($k, $tok));
    $c->restoreLock($k, $tok);    // a temporary: destroyed at once, sending nothing
    var_dump($held($k, $tok));
    $l = $c->restoreLock($k, $tok);
    $l->extend(20);
    unset($l);
    var_dump($held($k, $tok));
    var_dump($c->restoreLock($k, $tok)->release(), $left($k));

    // A caller's token from another process (a framework's owner string).
    $owner = 'owner-' . bin2hex(random_bytes(4));
    child('$c = new Distlock\Client($argv[1]); $c->tryLock($argv[2], 30, token: $argv[3])->abandon();',
          $servers, $k, $owner);
    var_dump($held($k, $owner), $c->restoreLock($k, $owner)->release(),
             $left($k));

    // A token this very client abandoned: restoring it is an explicit claim.
    $a = $c->tryLock($k, 30);
    $tok = $a->token();
    $a->abandon();
    var_dump($c->restoreLock($k, $tok)->release(), $left($k));
}

// distributedLock() in another process (the ERP pair), released here.
$k = dl_test_key('restore-compat');
$tok = child('ini_set("distlock.servers", $argv[1]); echo distributedLock($argv[2], 30);', dl_test_uri(), $k);
$c = new Client(dl_test_uri());
$r = dl_test_phpredis();
var_dump($r->get($k) === $tok, $c->restoreLock($k, $tok)->release(), $r->exists($k));

// Bad input: clear ValueErrors, nothing sent, another owner's lock untouched.
$l = $c->tryLock($k, 30);
err('empty key', fn() => $c->restoreLock('', 'tok'));
err('NUL key', fn() => $c->restoreLock("a\0b", 'tok'));
err('empty token', fn() => $c->restoreLock($k, ''));
err('NUL token', fn() => $c->restoreLock($k, $l->token() . "\0"));
err('long token', fn() => $c->restoreLock($k, str_repeat('t', 257)));
err('missing token', fn() => $c->restoreLock($k));
var_dump($r->get($k) === $l->token(), $l->release());
?>
--EXPECTF--
-- 1 node
int(32)
bool(true)
bool(false)
float(0)
NULL
bool(false)
bool(true)
extend wrong: Distlock\LockLostException 500016: distlock: extend "%s" failed: %s
bool(true)
bool(true)
bool(false)
bool(false)
float(0)
check: Distlock\LockLostException 500016: distlock: lock "%s" is not known held (Client::restoreLock() checks nothing on the servers; extend() it to know)
extend(): ValueError 0: Distlock\Lock::extend(): Argument #1 ($ttl) must be given for a lock from Client::restoreLock() until an extend() gave it a TTL
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
int(0)
bool(false)
bool(false)
bool(true)
bool(true)
bool(true)
bool(true)
int(0)
bool(true)
bool(true)
int(0)
bool(true)
int(0)
-- 3 nodes
int(32)
bool(true)
bool(false)
float(0)
NULL
bool(false)
bool(true)
extend wrong: Distlock\LockLostException 500016: distlock: extend "%s" failed: %s
bool(true)
bool(true)
bool(false)
bool(false)
float(0)
check: Distlock\LockLostException 500016: distlock: lock "%s" is not known held (Client::restoreLock() checks nothing on the servers; extend() it to know)
extend(): ValueError 0: Distlock\Lock::extend(): Argument #1 ($ttl) must be given for a lock from Client::restoreLock() until an extend() gave it a TTL
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
int(0)
bool(false)
bool(false)
bool(true)
bool(true)
bool(true)
bool(true)
int(0)
bool(true)
bool(true)
int(0)
bool(true)
int(0)
bool(true)
bool(true)
int(0)
empty key: ValueError 0: Distlock\Client::restoreLock(): Argument #1 ($key) must not be empty
NUL key: ValueError 0: Distlock\Client::restoreLock(): Argument #1 ($key) must not contain any null bytes
empty token: ValueError 0: distlock: restoreLock: token must not be empty
NUL token: ValueError 0: Distlock\Client::restoreLock(): Argument #2 ($token) must not contain any null bytes
long token: ValueError 0: distlock: restoreLock: token longer than 256 bytes
missing token: ArgumentCountError 0: Distlock\Client::restoreLock() expects exactly 2 arguments, 1 given
bool(true)
bool(true)
