--TEST--
distlock: rediss:// nodes: CA from INI or the constructor; verification on by default (a clear ConnectionException naming the node); mutual TLS options accepted
--EXTENSIONS--
distlock
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_TLS')) die('skip DISTLOCK_TEST_TLS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
$uri = explode(',', getenv('DISTLOCK_TEST_TLS'))[0];
$certs = getenv('DISTLOCK_TEST_CERTS');
$k = dl_test_key('tls');

// INI, for the compat functions.
ini_set('distlock.servers', $uri);
ini_set('distlock.tls_ca_file', "$certs/ca.crt");
$t = distributedLock($k, 30);
var_dump(is_string($t), distributedUnlock($k, $t));

// Constructor options (a client certificate too: the server accepts it).
$c = new Distlock\Client($uri, ['tls_ca_file' => "$certs/ca.crt", 'tls_cert' => "$certs/client.crt",
                                'tls_key' => "$certs/client.key", 'tls_server_name' => 'localhost']);
$l = $c->tryLock($k, 30);
var_dump($l instanceof Distlock\Lock, $l->release());
var_dump($c->servers()[0] === $uri);

// Verification is on by default: the test CA is not in the system store.
ini_set('distlock.tls_ca_file', '');
try { distributedLock($k, 30); echo "no exception\n"; }
catch (Exception $e) {
    echo get_class($e), "\n";
    var_dump(str_contains($e->getMessage(), $uri),
             str_contains($e->getMessage(), 'certificate verify failed'));
}
// A name the certificate does not have.
$c = new Distlock\Client($uri, ['tls_ca_file' => "$certs/ca.crt", 'tls_server_name' => 'wrong.example']);
try { $c->tryLock($k, 30); echo "no exception\n"; }
catch (Exception $e) { var_dump(str_contains($e->getMessage(), 'hostname mismatch')); }
// Options are type-checked.
try { new Distlock\Client($uri, ['tls_verify' => 'no']); } catch (Distlock\ConfigurationException $e) { echo $e->getMessage(), "\n"; }
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
Distlock\AcquireException
bool(true)
bool(true)
bool(true)
distlock: invalid client option: option "tls_verify" takes an integer, got "no"
