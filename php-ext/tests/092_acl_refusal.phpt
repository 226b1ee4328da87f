--TEST--
distlock: a refusal is an error, never a loss: an ACL user without GET gets RenewalException (not LockLostException) from extend(), its auto-renewed lock is not marked lost and onLost does not run while the key holds the token; a key of another type is PROTOCOL; a malformed server list never shows its password
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
$r->rawCommand('ACL', 'SETUSER', 'phpacl', 'reset', 'on', '>php-acl-pw', '~*', '&*', '+@all', '-get');
$c = new Client(str_replace('redis://', 'redis://phpacl:php-acl-pw@', dl_test_uri()));

// extend() refused inside the script: a renewal failure, the lock still ours
$k = dl_test_key('acl-extend');
$l = $c->tryLock($k, 30.0);
try { $l->extend(); echo "extended?!\n"; }
catch (Distlock\Exception $e) {
    echo get_class($e), ' ', $e->getCode() === Distlock\Exception::PROTOCOL ? 'PROTOCOL' : $e->getCode(), "\n";
}
var_dump($l->isLost(), $r->get($k) === $l->token());
$l->check();
echo "check passed\n";
$r->del($k);

// auto-renewal refused: renewal failures, no loss, no onLost (ttl 6 s: the first
// renewal is due at 2 s, the lease ends at ~5.9 s)
$k = dl_test_key('acl-renew');
$log = [];
$l = $c->tryLock($k, 6.0, Client::AUTO_RENEW);
$l->onLost(function () use (&$log) { $log[] = 'onLost'; });
var_dump(dl_test_wait_for(fn() => $c->stats()['renewal_failed_total'] >= 1 || $l->isLost(), 5.0));
var_dump($l->isLost(), $log, $c->stats()['lost_total'], $r->get($k) === $l->token());
$r->del($k);
$r->rawCommand('ACL', 'DELUSER', 'phpacl');

// a key of another type: the compat pair and the OO API say PROTOCOL, not "held"
$k = dl_test_key('acl-hash');
$r->hSet($k, 'f', 'v');
ini_set('distlock.servers', dl_test_uri());
try { distributedLock($k, 30); echo "locked?!\n"; }
catch (Exception $e) { echo get_class($e), ' ', $e->getCode() === Distlock\Exception::PROTOCOL ? 'PROTOCOL' : $e->getCode(), "\n"; }
$o = new Client(dl_test_uri());
try { $o->tryLock($k, 30.0); echo "locked?!\n"; }
catch (Distlock\Exception $e) { echo get_class($e), ' ', $e->getCode() === Distlock\Exception::PROTOCOL ? 'PROTOCOL' : $e->getCode(), "\n"; }
$r->del($k);

// a malformed server list: the message hides the password
foreach (['redis://u:S3/CRET@host:1', 'redis-sentinel://h:26379/m?Sentinel_Password=S3CRET'] as $bad) {
    try { new Client($bad); echo "accepted?!\n"; }
    catch (Distlock\Exception $e) {
        echo get_class($e), ' ', str_contains($e->getMessage(), 'S3') || str_contains($e->getMessage(), 'CRET') ? 'SHOWS THE PASSWORD' : 'masked', "\n";
    }
}
?>
--EXPECT--
Distlock\RenewalException PROTOCOL
bool(false)
bool(true)
check passed
bool(true)
bool(false)
array(0) {
}
int(0)
bool(true)
Distlock\AcquireException PROTOCOL
Distlock\AcquireException PROTOCOL
Distlock\ConfigurationException masked
Distlock\ConfigurationException masked
