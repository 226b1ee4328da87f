--TEST--
distlock OO: tryLock()/lock() with token: the key holds the caller's token on 1 and 3 nodes, strictly (a key already holding that token is held), with FENCING/AUTO_RENEW; a bad token (empty, NUL byte, too long, with SHARED) or an empty key is a ValueError that writes nothing and never touches another owner's lock
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
    catch (Throwable $e) { echo "$what: ", get_class($e), ': ', $e->getMessage(), "\n"; }
}

$cases = ['1 node' => [dl_test_uri()], '3 nodes' => dl_test_redlock()];
foreach ($cases as $name => $nodes) {
    echo "-- $name\n";
    $rs = array_map('dl_test_phpredis', $nodes);
    $c = new Client(implode(',', $nodes));
    $k = dl_test_key("token-$name");
    $owner = 'laravel-owner-' . bin2hex(random_bytes(4));
    // Connect every node first: this test checks the token on every node.
    dl_test_connect_every_node($c, $rs);
    // Nodes where the key holds $t, and nodes where it exists. A grant
    // returns once a quorum granted, a release once a quorum deleted: the
    // last node's write may still be on its way, so a count of every node
    // waits (bounded) for it.
    $on = fn(string $t) => count(array_filter($rs, fn($r) => $r->get($k) === $t));
    $left = fn() => array_sum(array_map(fn($r) => $r->exists($k), $rs));
    $gone = fn() => dl_test_wait_for(fn() => $left() === 0, 3.0) ? 0 : $left();

    // Every node holds the caller's token, and the Lock says so.
    $l = $c->tryLock($k, 10, token: $owner);
    var_dump(dl_test_wait_for(fn() => $on($owner) === count($nodes), 3.0), $l->token() === $owner);
    // Strict, as SET NX: the same token again is "held" (null, a timeout).
    var_dump($c->tryLock($k, 10, 0, $owner));
    err('lock same token', fn() => $c->lock($k, 10, timeout: 0.2, token: $owner));
    // Another owner's token: held too, and the key keeps ours.
    var_dump($c->tryLock($k, 10, token: 'someone-else'));
    // Bad tokens and keys: clear errors, nothing written, our lock untouched.
    err('empty token', fn() => $c->tryLock("$k:x", 10, token: ''));
    err('NUL token', fn() => $c->tryLock("$k:x", 10, token: "own\0er"));
    err('long token', fn() => $c->lock("$k:x", 10, 0.1, token: str_repeat('t', 257)));
    err('SHARED token', fn() => $c->tryLock("$k:x", 10, Client::SHARED, $owner));
    err('empty key', fn() => $c->tryLock('', 10, token: $owner));
    err('NUL key', fn() => $c->tryLock("a\0b", 10, token: $owner));
    $x = array_sum(array_map(fn($r) => $r->exists("$k:x"), $rs));
    var_dump($on($owner) === count($nodes), $x);
    // Its release deletes it everywhere; then the token takes it again.
    var_dump($l->release(), $gone());
    $l = $c->lock($k, 10, timeout: 1.0, flags: Client::FENCING | Client::AUTO_RENEW, token: $owner);
    var_dump($l->token() === $owner, is_int($l->fence()), $c->holder($k)['token'] === $owner);
    var_dump($l->release(), $gone());
    // 256 bytes is the most a token may have.
    $long = str_repeat('t', 256);
    $l = $c->tryLock($k, 10, token: $long);
    var_dump(dl_test_wait_for(fn() => $rs[0]->get($k) === $long, 3.0), $l->release());
}

// The compat pair and a token lock are the same lock on the wire.
ini_set('distlock.servers', dl_test_uri());
$c = new Client(dl_test_uri());
$k = dl_test_key('token-compat');
$t = distributedLock($k, 10, 'order-owner');
var_dump($c->tryLock($k, 10, token: 'order-owner'));
var_dump(distributedUnlock($k, $t));
$l = $c->tryLock($k, 10, token: 'order-owner');
var_dump(distributedUnlock($k, 'order-owner'), $l->release());
?>
--EXPECTF--
-- 1 node
bool(true)
bool(true)
NULL
lock same token: Distlock\LockTimeoutException: distlock: could not lock "%s" within 0.200 seconds: held by another owner
NULL
empty token: ValueError: distlock: lock: token must not be empty
NUL token: ValueError: Distlock\Client::tryLock(): Argument #4 ($token) must not contain any null bytes
long token: ValueError: distlock: lock: token longer than 256 bytes
SHARED token: ValueError: distlock: lock: args->token is for a plain lock: DISTLOCK_SHARED (a read lock) takes no caller's token
empty key: ValueError: Distlock\Client::tryLock(): Argument #1 ($key) must not be empty
NUL key: ValueError: Distlock\Client::tryLock(): Argument #1 ($key) must not contain any null bytes
bool(true)
int(0)
bool(true)
int(0)
bool(true)
bool(true)
bool(true)
bool(true)
int(0)
bool(true)
bool(true)
-- 3 nodes
bool(true)
bool(true)
NULL
lock same token: Distlock\LockTimeoutException: distlock: could not lock "%s" within 0.200 seconds: held by another owner
NULL
empty token: ValueError: distlock: lock: token must not be empty
NUL token: ValueError: Distlock\Client::tryLock(): Argument #4 ($token) must not contain any null bytes
long token: ValueError: distlock: lock: token longer than 256 bytes
SHARED token: ValueError: distlock: lock: args->token is for a plain lock: DISTLOCK_SHARED (a read lock) takes no caller's token
empty key: ValueError: Distlock\Client::tryLock(): Argument #1 ($key) must not be empty
NUL key: ValueError: Distlock\Client::tryLock(): Argument #1 ($key) must not contain any null bytes
bool(true)
int(0)
bool(true)
int(0)
bool(true)
bool(true)
bool(true)
bool(true)
int(0)
bool(true)
bool(true)
NULL
bool(true)
bool(true)
bool(false)
