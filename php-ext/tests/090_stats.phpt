--TEST--
distlock metrics: Client::stats() moves exactly as the scenario says (grants, refusals, failures by status, releases, wait and hold histograms, a node's errors)
--EXTENSIONS--
distlock
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;

require __DIR__ . '/fixtures/common.inc';
$uri = dl_test_uri();

function delta(array $a, array $b): array {
    $d = [];
    foreach ($b as $k => $v) {
        if ($v !== $a[$k]) $d[$k] = $v - $a[$k];
    }
    return $d;
}

// Client objects with the same servers and options share one persistent
// library client per worker, and so its counters: $b has other options.
$a = new Client($uri);
$b = new Client($uri, ['command_timeout_ms' => 400]);
$s = $a->stats();
var_dump(count($s) > 0, array_key_exists('acquire_granted_total', $s));
$names_ok = true;
foreach ($s as $k => $v) {
    $names_ok = $names_ok && is_int($v) && preg_match('/^[a-z_]+(\{[a-z]+="[^"]+"\})?$/', $k);
}
var_dump($names_ok);

$refusals = 3;
$k = dl_test_key('stats');
$a0 = $a->stats(); $b0 = $b->stats();
$l = $a->tryLock($k, 10);
for ($i = 0; $i < $refusals; $i++) var_dump($b->tryLock($k, 10));
var_dump($l->release());
$da = delta($a0, $a->stats());
$db = delta($b0, $b->stats());
var_dump($da['acquire_granted_total'], $da['release_total'], $da['acquire_wait_us_count'],
         $da['hold_us_count'], $da['hold_us_bucket{le="+Inf"}']);
var_dump($db['acquire_refused_total'] === $refusals, $db['acquire_wait_us_count'] === $refusals,
         isset($db['acquire_granted_total']));
$same = new Client($uri);
var_dump($same->stats() === $a->stats());

// A node nobody listens on: the connect is refused, the request is never
// sent (so there is no undo): one ECONN failure and one error on node 0.
$dead = new Client('redis://127.0.0.1:' . dl_test_free_port(), ['connect_timeout_ms' => 300]);
$d0 = $dead->stats();
try { $dead->tryLock($k, 10); echo "acquired on a dead node\n"; }
catch (Distlock\ConnectionException $e) { echo get_class($e), "\n"; }
$dd = delta($d0, $dead->stats());
ksort($dd);
unset($dd['acquire_wait_us_sum']);   // the time it took: not exact
$buckets = 0;   // one observation: +1 on every bucket from its own up to +Inf
foreach ($dd as $name => $v) {
    if (str_starts_with($name, 'acquire_wait_us_bucket')) { unset($dd[$name]); $buckets += $v; }
}
var_dump($buckets >= 1);
print_r($dd);
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
NULL
NULL
NULL
bool(true)
int(1)
int(1)
int(1)
int(1)
int(1)
bool(true)
bool(true)
bool(false)
bool(true)
Distlock\AcquireException
bool(true)
Array
(
    [acquire_failed_total{status="ECONN"}] => 1
    [acquire_wait_us_count] => 1
    [node_errors_total{node="0"}] => 1
)
