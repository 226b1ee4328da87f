--TEST--
distlock OO: Client::holder() gives the library's quorum verdict (the keys of Python's Client.holder(), kind and holders) on 1 and 3 nodes; Client::forceRelease() deletes whoever holds a key and counts the nodes; bad keys are ValueErrors
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS') || !getenv('DISTLOCK_TEST_REDLOCK')) die('skip DISTLOCK_TEST_REDIS / DISTLOCK_TEST_REDLOCK not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
require __DIR__ . '/fixtures/common.inc';

function show(string $what, array $h): void
{
    $tok = $h['token'] === null ? 'null' : (strlen($h['token']) === 32 ? 'token32' : $h['token']);
    $ttl = $h['ttl'] === null ? 'null' : ($h['ttl'] > 0 && $h['ttl'] <= 10.0 ? 'ttl<=10' : $h['ttl']);
    printf("%s: held=%s token=%s nodes=%d ttl=%s answered=%d taken=%d kind=%s holders=%d\n",
           $what, var_export($h['held'], true), $tok, $h['nodes'], $ttl, $h['answered'],
           $h['taken'], $h['kind'], $h['holders']);
}
function err(string $what, callable $f): void
{
    try { $f(); echo "$what: no error\n"; }
    catch (Throwable $e) { echo "$what: ", get_class($e), ' ', $e->getCode(), ': ', $e->getMessage(), "\n"; }
}

// One node.
$r = dl_test_phpredis();
$c = new Client(dl_test_uri());
$k = dl_test_key('holder');
show('free', $c->holder($k));
var_dump(array_keys($c->holder($k)));
$l = $c->tryLock($k, 10);
$h = $c->holder($k);
show('lock', $h);
var_dump($h['token'] === $l->token());
// A token written by anyone (the seed's SET without a TTL): held, no expiry.
$r->set("$k:plain", 'seed-token');
show('no ttl', $c->holder("$k:plain"));
// A value of another type is taken by someone else, held by no token.
$r->hSet("$k:hash", 'f', 'v');
show('hash', $c->holder("$k:hash"));
// Read locks and a semaphore hold no single token: kind and live holders.
$r1 = $c->tryLock("$k:rw", 10, Client::SHARED);
$r2 = $c->tryLock("$k:rw", 10, Client::SHARED);
show('readers', $c->holder("$k:rw"));
$p1 = $c->trySemaphore("$k:sem", 3, 10);
$p2 = $c->trySemaphore("$k:sem", 3, 10);
show('semaphore', $c->holder("$k:sem"));

// forceRelease on one node: deletes another owner's lock (an operator's
// override), whoever holds it; a free key deletes nothing.
var_dump($c->forceRelease($k), $r->exists($k), $l->release());
var_dump($c->forceRelease($k));
var_dump($c->forceRelease("$k:rw"), $c->holder("$k:rw")['kind']);

// Three nodes: the verdict counts the nodes holding one token.
$nodes = dl_test_redlock();
$rs = array_map('dl_test_phpredis', $nodes);
$c3 = new Client(implode(',', $nodes), ['connect_timeout_ms' => 500, 'command_timeout_ms' => 500]);
$k3 = dl_test_key('holder3');
// Connect every node first: the verdict below counts all three.
dl_test_connect_every_node($c3, $rs);
$l3 = $c3->tryLock($k3, 10);
$h = $c3->holder($k3);
show('3 nodes', $h);
var_dump($h['token'] === $l3->token());
$rs[0]->set("$k3:one", 'tok', ['PX' => 10000]);
show('1 of 3', $c3->holder("$k3:one"));
$rs[2]->set("$k3:one", 'tok', ['PX' => 10000]);
show('2 of 3', $c3->holder("$k3:one"));
var_dump($c3->forceRelease($k3), $rs[0]->exists($k3) + $rs[1]->exists($k3) + $rs[2]->exists($k3), $l3->release());
var_dump($c3->forceRelease("$k3:one"));

// A node that does not answer: a verdict it could change is no verdict.
$dead = 'redis://127.0.0.1:' . dl_test_free_port();
$cd = new Client("$nodes[0],$nodes[1],$dead", ['connect_timeout_ms' => 500, 'command_timeout_ms' => 500]);
$rs[0]->set("$k3:d", 'tok', ['PX' => 10000]);
err('holder, 1 of 2 answering', fn() => $cd->holder("$k3:d"));
$rs[1]->set("$k3:d", 'tok', ['PX' => 10000]);
show('2 of 2 answering', $cd->holder("$k3:d"));
err('forceRelease, one silent', fn() => $cd->forceRelease("$k3:d"));
var_dump($rs[0]->exists("$k3:d") + $rs[1]->exists("$k3:d"));

// Bad keys: a clear ValueError, nothing sent.
foreach (['holder', 'forceRelease'] as $m) {
    err("$m ''", fn() => $c->$m(''));
    err("$m NUL", fn() => $c->$m("a\0b"));
    err("$m 1025", fn() => $c->$m(str_repeat('k', 1025)));
}
?>
--EXPECTF--
free: held=false token=null nodes=0 ttl=null answered=1 taken=0 kind=free holders=0
array(8) {
  [0]=>
  string(4) "held"
  [1]=>
  string(5) "token"
  [2]=>
  string(5) "nodes"
  [3]=>
  string(3) "ttl"
  [4]=>
  string(8) "answered"
  [5]=>
  string(5) "taken"
  [6]=>
  string(4) "kind"
  [7]=>
  string(7) "holders"
}
lock: held=true token=token32 nodes=1 ttl=ttl<=10 answered=1 taken=1 kind=lock holders=0
bool(true)
no ttl: held=true token=seed-token nodes=1 ttl=null answered=1 taken=1 kind=lock holders=0
hash: held=false token=null nodes=0 ttl=null answered=1 taken=1 kind=other holders=0
readers: held=false token=null nodes=0 ttl=null answered=1 taken=1 kind=readers holders=2
semaphore: held=false token=null nodes=0 ttl=null answered=1 taken=1 kind=semaphore holders=2
int(1)
int(0)
bool(false)
int(0)
int(1)
string(4) "free"
3 nodes: held=true token=token32 nodes=3 ttl=ttl<=10 answered=3 taken=3 kind=lock holders=0
bool(true)
1 of 3: held=false token=tok nodes=1 ttl=ttl<=10 answered=3 taken=1 kind=lock holders=0
2 of 3: held=true token=tok nodes=2 ttl=ttl<=10 answered=3 taken=2 kind=lock holders=0
int(3)
int(0)
bool(false)
int(2)
holder, 1 of 2 answering: Distlock\ConnectionException 500015: distlock: holder "%s" failed: %s
2 of 2 answering: held=true token=tok nodes=2 ttl=ttl<=10 answered=2 taken=2 kind=lock holders=0
forceRelease, one silent: Distlock\ConnectionException 500015: distlock: forceRelease "%s" failed: %s
int(0)
holder '': ValueError 0: Distlock\Client::holder(): Argument #1 ($key) must not be empty
holder NUL: ValueError 0: Distlock\Client::holder(): Argument #1 ($key) must not contain any null bytes
holder 1025: ValueError 0: Distlock\Client::holder(): Argument #1 ($key) must be at most 1024 bytes long
forceRelease '': ValueError 0: Distlock\Client::forceRelease(): Argument #1 ($key) must not be empty
forceRelease NUL: ValueError 0: Distlock\Client::forceRelease(): Argument #1 ($key) must not contain any null bytes
forceRelease 1025: ValueError 0: Distlock\Client::forceRelease(): Argument #1 ($key) must be at most 1024 bytes long
