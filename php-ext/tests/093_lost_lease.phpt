--TEST--
distlock OO: a lost lease reaches the owner: isLost(), onLost at safe points only, check() throws LockLostException; acquire / renewal / loss are three classes
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
require __DIR__ . '/fixtures/common.inc';
$r = dl_test_phpredis();
$c = new Client(dl_test_uri(), ['command_timeout_ms' => 300]);
$log = [];

// 1. A worker holds an auto-renewed lock and runs PHP code that never calls the
// extension: the core's thread renews it meanwhile (the key stays), and when the
// key is deleted under it the renewal finds it lost -- but the callback runs only
// at the next call into the extension, in this thread.
$k = dl_test_key('lost-cb');
$l = $c->tryLock($k, 0.3, Client::AUTO_RENEW);
$l->onLost(function (Distlock\Lock $lock) use (&$log) {
    $log[] = 'onLost ' . $lock->key() . ' lost=' . var_export($lock->isLost(), true);
});
$end = microtime(true) + 1.0;   // three TTLs of pure PHP work
$kept = true;
while (microtime(true) < $end) { $kept = $kept && $r->get($k) !== false; usleep(20000); }
var_dump($kept, $log);
$r->del($k);
// The renewal (every 0.1 s) finds it gone; PHP code alone never sees a callback.
$end = microtime(true) + 1.0;
while (microtime(true) < $end) { usleep(20000); }
var_dump($log);
// Any call into the extension is a safe point (here Client::quorum()).
var_dump(dl_test_wait_for(function () use ($c, &$log) { $c->quorum(); return $log !== []; }, 5.0));
var_dump(count($log), $log[0] === "onLost $k lost=true");
$c->quorum();   // once only
var_dump(count($log));
try { $l->check(); echo "check passed\n"; }
catch (Distlock\LockLostException $e) {
    echo get_class($e), ' ', $e->getCode() === Distlock\Exception::NOT_OWNER ? 'NOT_OWNER' : $e->getCode(), ' ', $e->getMessage(), "\n";
}
try { $l->extend(); } catch (Distlock\Exception $e) { echo 'extend: ', get_class($e), "\n"; }

// 2. check() on a held lock passes; on an expired one (no renewal) and after
// release() it throws LockLostException.
$p = $c->tryLock(dl_test_key('plain'), 0.2);
$p->check();
echo "held: check passed\n";
var_dump(dl_test_wait_for(fn() => $p->validity() == 0.0, 3.0));
try { $p->check(); } catch (Distlock\LockLostException $e) { echo $e->getMessage(), "\n"; }
$q = $c->tryLock(dl_test_key('released'), 5.0);
$q->release();
try { $q->check(); } catch (Distlock\LockLostException $e) { echo $e->getMessage(), "\n"; }

// 3. A callback that throws: the exception comes out of the call that reached
// the safe point, and that call does nothing else (the other lock stays held).
// Here extend() finds the lease gone (it throws LockLostException itself; the
// loss is now known) and the next call, $b->release(), meets the callback.
$k1 = dl_test_key('thrower');
$k2 = dl_test_key('bystander');
$a = $c->tryLock($k1, 5.0);
$b = $c->tryLock($k2, 5.0);
$a->onLost(function () { throw new RuntimeException('stop the job'); });
$r->del($k1);
try { $a->extend(); } catch (Distlock\LockLostException $e) { echo "extend: lost\n"; }
try { $b->release(); echo "released\n"; }
catch (RuntimeException $e) { echo get_class($e), ': ', $e->getMessage(), "\n"; }
var_dump($r->get($k2) === $b->token(), $b->isHeld());
var_dump($b->release());

// onLost set after the loss is known: called at once (onLost is a safe point too).
$k3 = dl_test_key('late');
$d = $c->tryLock($k3, 0.3, Client::AUTO_RENEW);
$r->del($k3);
var_dump(dl_test_wait_for(fn() => $d->isLost(), 5.0));
$seen = 0;
$d->onLost(function () use (&$seen) { $seen++; });
var_dump($seen);
$d->onLost(null);

// A callback that holds its own Lock is a cycle the collector frees (the key goes).
$k4 = dl_test_key('cycle');
$e4 = $c->tryLock($k4, 5.0);
$e4->onLost(function () use ($e4) { echo $e4->key(); });
unset($e4);
gc_collect_cycles();
var_dump($r->exists($k4));

// 4. Three failures, three classes. Acquire: the server unreachable.
$port = dl_test_free_port();
$dead = new Client("redis://127.0.0.1:$port", ['connect_timeout_ms' => 200]);
try { $dead->tryLock(dl_test_key('x'), 1.0); } catch (Distlock\Exception $e) { echo 'acquire: ', get_class($e), "\n"; }
// Renewal: the node answers nothing in time (scripts paused); the lease is not lost.
$k5 = dl_test_key('renew-fail');
$f = $c->tryLock($k5, 10.0);
$r->rawCommand('CLIENT', 'PAUSE', '1500', 'WRITE');
try { $f->extend(); } catch (Distlock\Exception $e) {
    echo 'renewal: ', get_class($e), ' ', $e instanceof Distlock\ConnectionException ? 'is a ConnectionException' : '', "\n";
}
var_dump($f->isLost(), $f->validity() > 0.0);
$r->rawCommand('CLIENT', 'UNPAUSE');
$f->check();
var_dump($f->release());
// Loss: LockLostException (above), never a ConnectionException.
var_dump(is_subclass_of('Distlock\LockLostException', 'Distlock\ConnectionException'),
         is_subclass_of('Distlock\AcquireException', 'Distlock\ConnectionException'),
         is_subclass_of('Distlock\RenewalException', 'Distlock\ConnectionException'));
?>
--EXPECTF--
bool(true)
array(0) {
}
array(0) {
}
bool(true)
int(1)
bool(true)
int(1)
Distlock\LockLostException NOT_OWNER distlock: lock "phpt:%s:lost-cb" was found lost (expired, deleted or taken over)
extend: Distlock\LockLostException
held: check passed
bool(true)
distlock: lock "phpt:%s:plain" has expired (its validity ran out)
distlock: lock "phpt:%s:released" was released
extend: lost
RuntimeException: stop the job
bool(true)
bool(true)
bool(true)
bool(true)
int(1)
int(0)
acquire: Distlock\AcquireException
renewal: Distlock\RenewalException is a ConnectionException
bool(false)
bool(true)
bool(true)
bool(false)
bool(true)
bool(true)
