--TEST--
distlock compat: an unreachable server or a bad server list gets its own exception class and code, naming the server
--EXTENSIONS--
distlock
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
$port = dl_test_free_port();
ini_set('distlock.servers', "redis://127.0.0.1:$port");
ini_set('distlock.connect_timeout_ms', '300');

$t0 = microtime(true);
try {
    distributedLock(dl_test_key('down'), 60);
    echo "no exception\n";
} catch (Exception $e) {   // the ERP code's catch catches it too
    echo get_class($e), ' ', $e->getCode(), "\n";
    var_dump($e instanceof Distlock\ConnectionException, $e->getCode() === Distlock\Exception::CONNECTION);
    var_dump(str_contains($e->getMessage(), "127.0.0.1:$port"));
    echo str_replace((string)$port, 'PORT', $e->getMessage()), "\n";
}
// Bounded by the connect timeout, not hung.
var_dump(microtime(true) - $t0 < 2.0);

try {
    distributedUnlock(dl_test_key('down'), 'tok');
    echo "no exception\n";
} catch (Distlock\ConnectionException $e) {
    echo get_class($e), ' ', $e->getCode(), ' ', (str_contains($e->getMessage(), "127.0.0.1:$port") ? 'names the server' : $e->getMessage()), "\n";
}

// A server list that is not a list of URIs: ConfigurationException, nothing contacted.
foreach (['not a uri', 'http://127.0.0.1:1', "redis://127.0.0.1:$port,redis://127.0.0.1:$port"] as $bad) {
    ini_set('distlock.servers', $bad);
    try {
        distributedLock(dl_test_key('cfg'));
        echo "no exception\n";
    } catch (Distlock\ConfigurationException $e) {
        echo get_class($e), ' ', $e->getCode(), "\n";
    }
}
?>
--EXPECTF--
Distlock\AcquireException 500013
bool(true)
bool(true)
bool(true)
distlock: distributedLock "phpt:%s:down" failed: %sredis://127.0.0.1:PORT%s
bool(true)
Distlock\ConnectionException 500013 names the server
Distlock\ConfigurationException 500011
Distlock\ConfigurationException 500011
Distlock\ConfigurationException 500011
