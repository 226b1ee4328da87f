--TEST--
distlock: frozen nodes tell the same story as in C, Python and the CLI (one meaning per status): one of three frozen still locks, the only node frozen is a ConnectionException, two of three NO_QUORUM, a grant after the ttl TIMED_OUT; only a real holder is "held" (500002)
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDLOCK')) die('skip DISTLOCK_TEST_REDLOCK not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';

// The three Redlock servers, empty, behind the fault-injecting proxy
// (tests/harness/faultproxy.py; listener L -> server L). A frozen node is a
// listener whose traffic the proxy holds both ways: nothing ever answers.
$targets = [];
foreach (dl_test_redlock() as $uri) {
    dl_test_phpredis($uri)->flushAll();
    [$h, $p] = dl_test_hostport($uri);
    $targets[] = '--target';
    $targets[] = "$h:$p";
}
$proc = proc_open(array_merge(['python3', __DIR__ . '/../../tests/harness/faultproxy.py'], $targets),
                  [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes);
preg_match('/control=(\d+) listen=([\d,]+)/', fgets($pipes[1]), $m) or die("no proxy\n");
$ctl = fsockopen('127.0.0.1', (int)$m[1]);
$lp = explode(',', $m[2]);
function fp(string $cmd): void {
    global $ctl;
    fwrite($ctl, "$cmd\n");
    $a = fgets($ctl);
    if (!str_starts_with($a, 'ok')) die("faultproxy $cmd: $a");
}
function uris(array $listeners): string {
    global $lp;
    return implode(',', array_map(fn($l) => "redis://127.0.0.1:{$lp[$l]}", $listeners));
}
function holders(string $key): int {
    $n = 0;
    foreach (dl_test_redlock() as $uri) $n += dl_test_phpredis($uri)->exists($key);
    return $n;
}
const OPTS = ['command_timeout_ms' => 300, 'connect_timeout_ms' => 300];
function client(array $listeners, array $opts = OPTS): Distlock\Client {
    $c = new Distlock\Client(uris($listeners), $opts);
    $c->tryLock(dl_test_key('warm:' . implode('', $listeners)), 5)->release(); // connected, scripts loaded
    return $c;
}
function compat_on(array $listeners): void {
    ini_set('distlock.servers', uris($listeners));
    ini_set('distlock.command_timeout_ms', '300');
    ini_set('distlock.connect_timeout_ms', '300');
}
// What the caller sees: the class, the code, whether the message speaks of
// another owner, and (with $bound) whether it came within about the command timeout.
function story(string $what, callable $f, ?float $bound = 2.0): void {
    $t0 = microtime(true);
    try {
        $r = $f();
        echo "$what: returned ", is_object($r) ? get_class($r) : var_export($r, true), "\n";
    } catch (Exception $e) {
        $held = preg_match('/another owner|held by|请求过于频繁/u', $e->getMessage()) ? 'says held' : 'does not say held';
        echo "$what: ", get_class($e), ' ', $e->getCode(), ", $held\n";
    }
    $took = microtime(true) - $t0;
    if ($bound !== null && $took >= $bound) echo "$what: took $took s\n";
}

echo "-- a) one of three frozen\n";
$a = client([0, 1, 2]);
compat_on([0, 1, 2]);
distributedUnlock(dl_test_key('warm'), distributedLock(dl_test_key('warm')));
$k = dl_test_key('one-of-three');
fp('hold 2');
$l = $a->tryLock($k, 10);
var_dump($l instanceof Distlock\Lock, holders($k));
story('tryLock by another owner', fn() => $a->tryLock($k, 10));
story('lock(0.4) by another owner', fn() => $a->lock($k, 10, 0.4));
story('distributedLock by another owner', fn() => distributedLock($k, 10));
var_dump($l->release(), holders($k));
$l2 = $a->tryLock($k, 10);
var_dump($l2 instanceof Distlock\Lock, $l2->release());
$t = distributedLock($k, 10);
var_dump(distributedUnlock($k, $t));

echo "-- b) the only node frozen\n";
$c = client([0]);
$held = $c->tryLock(dl_test_key('only-held'), 10);
compat_on([0]);
distributedUnlock(dl_test_key('warm'), distributedLock(dl_test_key('warm')));
fp('hold 0');
$t0 = microtime(true);
story('tryLock', fn() => $c->tryLock(dl_test_key('only-1'), 10));
var_dump(microtime(true) - $t0 >= 0.25);   // it waited the command timeout, no more (story's bound)
story('lock(3.0)', fn() => $c->lock(dl_test_key('only-2'), 10, 3.0));
story('distributedLock', fn() => distributedLock(dl_test_key('only-3'), 10));
story('distributedUnlock', fn() => distributedUnlock(dl_test_key('only-3'), 'tok'));
story('release', fn() => $held->release());
var_dump(Distlock\Exception::CONNECTION);

echo "-- c) two of three frozen\n";
fp('heal');
$c = client([0, 1, 2]);
compat_on([0, 1, 2]);
distributedUnlock(dl_test_key('warm'), distributedLock(dl_test_key('warm')));
fp('hold 1');
fp('hold 2');
story('tryLock', fn() => $c->tryLock(dl_test_key('two-1'), 10));
story('lock(3.0)', fn() => $c->lock(dl_test_key('two-2'), 10, 3.0));
story('distributedLock', fn() => distributedLock(dl_test_key('two-3'), 10));
// The live node's grants were undone (no key anywhere once the undo arrived).
var_dump(dl_test_wait_for(fn() => holders(dl_test_key('two-1')) + holders(dl_test_key('two-2'))
                                  + holders(dl_test_key('two-3')) == 0, 3.0));
var_dump(Distlock\Exception::NO_QUORUM);

echo "-- d) a quorum grants only after the ttl is used up\n";
fp('heal');
$c = client([0, 1, 2], ['command_timeout_ms' => 1000, 'connect_timeout_ms' => 1000]);
fp('delay * 300 up');           // the grants of a 0.1 s lease come back after it ended
story('tryLock(ttl 0.1)', fn() => $c->tryLock(dl_test_key('late-1'), 0.1), 3.0);
story('lock(ttl 0.1, 5.0)', fn() => $c->lock(dl_test_key('late-2'), 0.1, 5.0), 3.0);
fp('delay * 0 up');
// Undone (the undo may still be on its way through the delay, or the lease expiring).
var_dump(dl_test_wait_for(fn() => holders(dl_test_key('late-1')) + holders(dl_test_key('late-2')) == 0, 3.0));
var_dump(Distlock\Exception::TIMED_OUT);

fp('heal');
fclose($ctl);
fclose($pipes[0]);
fclose($pipes[1]);
proc_close($proc);
?>
--EXPECT--
-- a) one of three frozen
bool(true)
int(2)
tryLock by another owner: returned NULL
lock(0.4) by another owner: Distlock\LockTimeoutException 500002, says held
distributedLock by another owner: Exception 500002, says held
bool(true)
int(0)
bool(true)
bool(true)
bool(true)
-- b) the only node frozen
tryLock: Distlock\AcquireException 500013, does not say held
bool(true)
lock(3.0): Distlock\AcquireException 500013, does not say held
distributedLock: Distlock\AcquireException 500013, does not say held
distributedUnlock: Distlock\ConnectionException 500013, does not say held
release: Distlock\ConnectionException 500013, does not say held
int(500013)
-- c) two of three frozen
tryLock: Distlock\AcquireException 500015, does not say held
lock(3.0): Distlock\AcquireException 500015, does not say held
distributedLock: Distlock\AcquireException 500015, does not say held
bool(true)
int(500015)
-- d) a quorum grants only after the ttl is used up
tryLock(ttl 0.1): Distlock\AcquireException 500014, does not say held
lock(ttl 0.1, 5.0): Distlock\AcquireException 500014, does not say held
bool(true)
int(500014)
