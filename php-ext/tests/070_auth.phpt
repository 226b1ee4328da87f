--TEST--
distlock: ACL user/password from INI, the constructor or the URI; a refused login is a ConnectionException; passwords are masked
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
$r = dl_test_phpredis();
$uri = dl_test_uri();
[$host, $port] = dl_test_hostport($uri);
$user = 'dl' . getmypid();
var_dump($r->rawCommand('ACL', 'SETUSER', $user, 'on', '>s3cret', '~*', '&*', '+@all'));
register_shutdown_function(fn() => dl_test_phpredis()->rawCommand('ACL', 'DELUSER', $user));
$clients = fn() => $r->rawCommand('CLIENT', 'LIST');

// INI, for the compat functions.
ini_set('distlock.servers', $uri);
ini_set('distlock.username', $user);
ini_set('distlock.password', 's3cret');
$k = dl_test_key('auth');
$t = distributedLock($k, 30);
var_dump(str_contains($clients(), "user=$user"));
var_dump(distributedUnlock($k, $t));

// Constructor options.
$c = new Distlock\Client($uri, ['username' => $user, 'password' => 's3cret']);
$l = $c->tryLock($k, 30);
var_dump($l->release());

// In the URI; node URIs never show the password.
$c = new Distlock\Client("redis://$user:s3cret@$host:$port");
var_dump($c->tryLock($k, 30)->release());
$shown = $c->servers()[0];
var_dump(str_contains($shown, 's3cret'), str_contains($shown, '***'));

// Wrong password: a ConnectionException that says so, not a lock failure.
ini_set('distlock.password', 'wrong');
try { distributedLock($k, 30); echo "no exception\n"; }
catch (Exception $e) {
    echo get_class($e), ' ', $e->getCode() === Distlock\Exception::PROTOCOL || $e->getCode() === Distlock\Exception::CONNECTION ? 'code ok' : $e->getCode(), "\n";
    var_dump(str_contains($e->getMessage(), "$host:$port"), str_contains($e->getMessage(), 'wrong'));
}
// ... and nothing ran as the default user behind the refused login.
var_dump($r->exists($k));
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(false)
bool(true)
Distlock\AcquireException code ok
bool(true)
bool(false)
int(0)
