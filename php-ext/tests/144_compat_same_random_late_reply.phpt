--TEST--
distlock: distributedLock() with an order number another worker holds as its $random, whose reply comes too late, leaves that worker's lock in place (one server): the order stays locked against every other caller
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';

// The ERP's use: distributedLock($key, 60, $orderNo) in two workers at once.
// Worker A holds the order's key with the order number as its token. Worker B
// asks for it with the same $random through the fault-injecting proxy, whose
// reply (it names A's token) is held past B's command timeout: B's request ran
// on the server and changed nothing. B fails; A's lock must still be there,
// so a third caller is still kept out.
[$h, $p] = dl_test_hostport(dl_test_uri());
$proc = proc_open(['python3', __DIR__ . '/../../tests/harness/faultproxy.py', '--target', "$h:$p"],
                  [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes);
preg_match('/control=(\d+) listen=(\d+)/', fgets($pipes[1]), $m) or die("no proxy\n");
$ctl = fsockopen('127.0.0.1', (int)$m[1]);
function fp(string $cmd): void {
    global $ctl;
    fwrite($ctl, "$cmd\n");
    $a = fgets($ctl);
    if (!str_starts_with($a, 'ok')) die("faultproxy $cmd: $a");
}

$k = dl_test_key('order-late-reply');
$order = 'ORDER-20240042';
$a = new Distlock\Client(dl_test_uri());
$held = $a->tryLock($k, 60, token: $order);          // worker A
var_dump($held instanceof Distlock\Lock);

ini_set('distlock.servers', "redis://127.0.0.1:{$m[2]}");   // worker B, through the proxy
ini_set('distlock.command_timeout_ms', '300');
distributedUnlock(dl_test_key('warm'), distributedLock(dl_test_key('warm')));  // connected
fp('hold-match 0 down ' . bin2hex($order));
try {
    distributedLock($k, 60, $order);
    echo "B: got the order's lock\n";
} catch (Exception $e) {
    echo "B: ", get_class($e), "\n";
}
fp('heal');
$r = dl_test_phpredis();
echo "A's key holds: ", var_export($r->get($k), true), "\n";
var_dump($held->isHeld());
var_dump((new Distlock\Client(dl_test_uri()))->tryLock($k, 60));   // a third caller
$held->release();
fclose($pipes[0]);
proc_close($proc);
?>
--EXPECTF--
bool(true)
B: %s
A's key holds: 'ORDER-20240042'
bool(true)
NULL
