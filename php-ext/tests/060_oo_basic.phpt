--TEST--
distlock OO: Client from INI or constructor, tryLock / release / extend / validity, a destroyed Lock releases
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
use Distlock\Lock;

require __DIR__ . '/fixtures/common.inc';
$r = dl_test_phpredis();
$uri = dl_test_uri();

$c = new Client($uri, ['connect_timeout_ms' => 500, 'command_timeout_ms' => 300]);
var_dump($c->servers() === [$uri], $c->quorum());
ini_set('distlock.servers', $uri);
$fromIni = new Client();
var_dump($fromIni->servers() === [$uri]);

$k = dl_test_key('oo');
$l = $c->tryLock($k, 10);
var_dump($l instanceof Lock, $l->key() === $k, (bool)preg_match('/^[0-9a-f]{32}$/', $l->token()));
var_dump($r->get($k) === $l->token());
$v = $l->validity();
var_dump($v > 9.0 && $v <= 10.0, $l->isHeld(), $l->isLost(), $l->fence());

// var_dump shows what matters, and never the token.
ob_start(); var_dump($l); $dump = ob_get_clean();
var_dump(str_contains($dump, $k), str_contains($dump, '["held"]=>' . "\n  bool(true)"), str_contains($dump, $l->token()));
print_r($c);

// Contention: null from tryLock, 500002 from the compat function, the seed's SET NX fails.
var_dump($fromIni->tryLock($k, 10));
try { distributedLock($k, 10); } catch (Exception $e) { var_dump($e->getCode()); }
var_dump($r->set($k, '1', ['NX', 'EX' => 10]));

// extend: a fresh TTL on the server and a fresh validity.
$v = $l->extend(30);
var_dump($v > 29.0 && $v <= 30.0, $r->pttl($k) > 29000);
$v = $l->extend();   // null: the last TTL
var_dump($v > 29.0);

// release: true once, then false; validity 0.
var_dump($l->release(), $r->exists($k), $l->release(), $l->validity(), $l->isHeld());
try { $l->extend(5); echo "extended a released lock\n"; }
catch (Distlock\LockLostException $e) { echo get_class($e), ' ', $e->getCode(), "\n"; }

// A Lock that goes out of scope while held releases its key.
function work(Client $c, string $k, $r) {
    $l = $c->tryLock($k, 30);
    return $r->get($k) === $l->token();
}
$k2 = dl_test_key('scope');
var_dump(work($c, $k2, $r), $r->exists($k2));
$l = $c->tryLock($k2, 30);
unset($l);
var_dump($r->exists($k2));

// The lock's key is not freed by someone else's release: a lock lost to expiry.
$k3 = dl_test_key('expire');
$l = $c->tryLock($k3, 0.2);
var_dump(dl_test_wait_for(fn() => !$r->exists($k3), 5.0));
$other = $c->tryLock($k3, 30);
var_dump($l->release(), $r->get($k3) === $other->token());
try { $l->extend(1); } catch (Distlock\LockLostException $e) { echo "lost\n"; }
var_dump($other->release());

// Not constructible, clonable or serializable; bad arguments are ValueErrors.
foreach ([
    'new Lock'   => fn() => new Lock(),
    'clone'      => fn() => clone $c,
    'serialize'  => fn() => serialize($c),
    'empty key'  => fn() => $c->tryLock(''),
    'ttl 0'      => fn() => $c->tryLock($k, 0),
    'ttl NAN'    => fn() => $c->tryLock($k, NAN),
    'ttl huge'   => fn() => $c->tryLock($k, 1e12),
    'bad flags'  => fn() => $c->tryLock($k, 1, 1 << 20),
    'timeout -1' => fn() => $c->lock($k, 1, -1.0),
    'bad option' => fn() => new Client($uri, ['nope' => 1]),
    'bad type'   => fn() => new Client($uri, ['connect_timeout_ms' => '1s']),
    'bad uri'    => fn() => new Client('ftp://x'),
    'empty uri'  => fn() => new Client(''),
] as $name => $f) {
    try { $f(); echo "$name: no error\n"; }
    catch (Throwable $e) { echo "$name: ", get_class($e), ': ', $e->getMessage(), "\n"; }
}
var_dump($r->exists($k));
?>
--EXPECTF--
bool(true)
int(1)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(false)
NULL
bool(true)
bool(true)
bool(false)
Distlock\Client Object
(
    [servers] => Array
        (
            [0] => redis://127.0.0.1:%d
        )

    [quorum] => 1
)
NULL
int(500002)
bool(false)
bool(true)
bool(true)
bool(true)
bool(true)
int(0)
bool(false)
float(0)
bool(false)
Distlock\LockLostException 500016
bool(true)
int(0)
int(0)
bool(true)
bool(false)
bool(true)
lost
bool(true)
new Lock: Error: Call to private Distlock\Lock::__construct() from global scope
clone: Error: Trying to clone an uncloneable object of class Distlock\Client
serialize: Exception: Serialization of 'Distlock\Client' is not allowed
empty key: ValueError: Distlock\Client::tryLock(): Argument #1 ($key) must not be empty
ttl 0: ValueError: Distlock\Client::tryLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got 0
ttl NAN: ValueError: Distlock\Client::tryLock(): Argument #2 ($ttl) must be a finite number of seconds > 0, got nan
ttl huge: ValueError: Distlock\Client::tryLock(): Argument #2 ($ttl) must be at most 2147483.647 seconds (DISTLOCK_TTL_MAX ms), got 1e+12
bad flags: ValueError: Distlock\Client::tryLock(): Argument #3 ($flags) must be 0 or a combination of Client::FENCING, Client::AUTO_RENEW and Client::SHARED
timeout -1: ValueError: Distlock\Client::lock(): Argument #3 ($timeout) must be between 0.000 and 2147483.647 seconds
bad option: ValueError: Distlock\Client::__construct(): Argument #2 ($options) has an unknown option "nope"
bad type: Distlock\ConfigurationException: distlock: invalid client option: option "connect_timeout_ms" takes an integer, got "1s"
bad uri: Distlock\ConfigurationException: distlock: invalid servers (distlock.servers or Client's $servers): %s
empty uri: ValueError: Distlock\Client::__construct(): Argument #1 ($servers) must be a non-empty server list without null bytes
int(0)
