--TEST--
distlock: no output shows a password (URI, options, INI; good, bad and unreachable servers): var_dump & co, exceptions and their traces, phpinfo, php --ri; Client and Lock are not serializable
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--INI--
zend.exception_ignore_args=0
zend.exception_string_param_max_len=1000000
distlock.servers="redis://bob:S3cretPassw0rd@127.0.0.1:1"
distlock.password=S3cretPassw0rd
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
use Distlock\Client;

$sec = 'S3cretPassw0rd';
$uri = dl_test_uri();
[$host, $port] = dl_test_hostport($uri);
$free = dl_test_free_port();
$user = 'dlsec' . getmypid();
$r = dl_test_phpredis();
$r->rawCommand('ACL', 'SETUSER', $user, 'on', ">$sec", '~*', '&*', '+@all');
register_shutdown_function(fn() => dl_test_phpredis()->rawCommand('ACL', 'DELUSER', $user));
$k = dl_test_key('secret');

// Each case prints "ok LABEL" when no piece of the password is in $out and
// $want (where the URI is shown) is; every case runs, so a diff lists every leak.
function shown(string $label, string $out, ?string $want = '***'): void
{
    if (str_contains($out, 'S3cret') || str_contains($out, 'Passw0rd')) {
        echo "LEAK in $label:\n$out\n";
    } elseif ($want !== null && !str_contains($out, $want)) {
        echo "MISSING '$want' in $label:\n$out\n";
    } else {
        echo "ok $label\n";
    }
}
function dumps(mixed $v): string
{
    ob_start();
    var_dump($v);
    print_r($v);
    debug_zval_dump($v);
    echo json_encode($v), "\n";
    return ob_get_clean();
}
function exported(mixed $v): string
{
    return var_export($v, true) . print_r((array)$v, true);
}
// What an exception shows: message, __toString (with the trace and its
// arguments: exception_ignore_args=0), and the extension call's frame as
// var_dump($e) shows it (the test's own frames hold the secret in closures).
function caught(callable $f): string
{
    try {
        $f();
        return 'no exception';
    } catch (Throwable $e) {
        return get_class($e) . ': ' . $e->getMessage() . "\n" . $e . "\n" . dumps($e->getTrace()[0] ?? []);
    }
}
function info(): string
{
    ob_start();
    phpinfo(INFO_MODULES);
    return ob_get_clean();
}
ini_set('distlock.password', '');   // the --INI-- value stays the master value
ini_set('distlock.servers', $uri);

echo "-- good URI, real ACL user\n";
$c = new Client("redis://$user:$sec@$host:$port");
$l = $c->tryLock($k, 30);
var_dump($l instanceof Distlock\Lock, str_contains($r->rawCommand('CLIENT', 'LIST'), "user=$user"));
shown('var_dump/print_r/debug_zval_dump/json of Client', dumps($c), "redis://$user:***@$host:$port");
shown('var_export/(array) of Client', exported($c), null);
shown('servers()', implode(',', $c->servers()), "redis://$user:***@$host:$port");
shown('dumps of Lock', dumps($l) . exported($l), null);
shown('serialize(Client)', caught(fn() => serialize($c)), 'is not allowed');
shown('serialize(Lock)', caught(fn() => serialize($l)), 'is not allowed');
shown('unserialize(Client)', caught(fn() => unserialize('O:15:"Distlock\Client":0:{}')), 'not allowed');
var_dump($l->release());

echo "-- good, password from the options / the INI\n";
$c = new Client($uri, ['username' => $user, 'password' => $sec]);
var_dump($c->tryLock($k, 30)->release());
shown('dumps of Client (options)', dumps($c) . exported($c), "$host:$port");
ini_set('distlock.username', $user);
ini_set('distlock.password', $sec);
var_dump(distributedUnlock($k, distributedLock($k, 30)));
shown('phpinfo() with distlock.password set', info(), 'distlock.password => *** => ***');
ini_set('distlock.username', '');
ini_set('distlock.password', '');

echo "-- bad port\n";
$bad = "redis://$user:$sec@127.0.0.1:99999";
// The core's message masks everything between "://" and the entry's last '@'.
shown('new Client(bad URI)', caught(fn() => new Client($bad)), "'redis://***@127.0.0.1:99999'");
shown('new Client(bad URI, password option)', caught(fn() => new Client($bad, ['password' => $sec])), "***@127.0.0.1:99999");
ini_set('distlock.servers', $bad);
shown('distributedLock with a bad distlock.servers', caught(fn() => distributedLock($k)), "***@127.0.0.1:99999");
shown('phpinfo() with a bad distlock.servers', info(), "distlock.servers => redis://$user:***@127.0.0.1:99999 => redis://bob:***@127.0.0.1:1");
ini_set('distlock.servers', $uri);

echo "-- unreachable\n";
$down = "redis://$user:$sec@127.0.0.1:$free";
$c = new Client($down, ['connect_timeout_ms' => 300]);
shown('dumps of an unreachable Client', dumps($c), "$user:***@");
shown('tryLock on an unreachable server', caught(fn() => $c->tryLock($k)), "redis://$user:***@127.0.0.1:$free");
$c = new Client("redis://$user:$sec@192.0.2.1:6379", ['connect_timeout_ms' => 200]);
shown('tryLock on an unroutable address', caught(fn() => $c->tryLock($k)), "redis://$user:***@192.0.2.1:6379");
$c = new Client("redis://127.0.0.1:$free", ['username' => $user, 'password' => $sec, 'connect_timeout_ms' => 300]);
shown('lock() with the password in the options', caught(fn() => $c->lock($k, 1, 0.1)), "127.0.0.1:$free");
ini_set('distlock.servers', $down);
ini_set('distlock.password', $sec);
shown('distributedLock on an unreachable server', caught(fn() => distributedLock($k)), "$user:***@");
shown('distributedUnlock on an unreachable server', caught(fn() => distributedUnlock($k, 'tok')), "$user:***@");
ini_set('distlock.password', '');
ini_set('distlock.servers', $uri);

echo "-- wrong password for the ACL user\n";
$c = new Client("redis://$user:{$sec}x@$host:$port");
shown('tryLock refused', caught(fn() => $c->tryLock($k)), "redis://$user:***@$host:$port");

echo "-- passwords the list parser cuts up or quotes in pieces\n";
foreach (['%40' => 'S3cret%40Passw0rd', ',' => 'S3cret,Passw0rd', ' ' => 'S3cret Passw0rd',
          '@' => 'S3cret@Passw0rd', '/' => 'S3cret/Passw0rd'] as $what => $pw) {
    shown("a password with '$what'", caught(fn() => new Client("redis://$user:$pw@127.0.0.1:99999")), "***@127.0.0.1:99999");
}
$sentinel = "redis-sentinel://$user:$sec@h1,h2/mymaster?sentinel_password=$sec&password=$sec";
// (a masked value runs to the next option whose value is shown: "&password=..." may
// be part of the sentinel password)
shown('a sentinel-style URI', caught(fn() => new Client($sentinel)), "'redis-sentinel://***@h1,h2/mymaster?sentinel_password=***'");
ini_set('distlock.servers', $sentinel);
shown('phpinfo() of a sentinel-style URI', info(),
      "redis-sentinel://$user:***@h1,h2/mymaster?sentinel_password=***&password=***");
ini_set('distlock.servers', $uri);
shown('an empty entry quotes the whole list',
      caught(fn() => new Client("$uri,redis://$user:$sec@127.0.0.1:$free,,redis://h:3")), "***@127.0.0.1:$free");

echo "-- uncaught, and php --ri, in a child process\n";
$php = getenv('TEST_PHP_EXECUTABLE') ?: PHP_BINARY;
$ext = getenv('DISTLOCK_EXT_SO');
$run = function (array $args) use ($php, $ext): string {
    $p = proc_open(array_merge([$php, '-n', '-d', "extension=$ext", '-d', 'zend.exception_ignore_args=0',
                                '-d', 'display_errors=stderr', '-d', 'log_errors=0'], $args),
                   [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    $out = stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]);
    proc_close($p);
    return $out;
};
shown('uncaught ConfigurationException', $run(['-r', "new Distlock\\Client('$bad');"]), 'Uncaught Distlock\ConfigurationException');
shown('php --ri distlock', $run(['-d', "distlock.servers=$bad", '-d', "distlock.password=$sec", '--ri', 'distlock']),
      "distlock.servers => redis://$user:***@127.0.0.1:99999");
?>
--EXPECT--
-- good URI, real ACL user
bool(true)
bool(true)
ok var_dump/print_r/debug_zval_dump/json of Client
ok var_export/(array) of Client
ok servers()
ok dumps of Lock
ok serialize(Client)
ok serialize(Lock)
ok unserialize(Client)
bool(true)
-- good, password from the options / the INI
bool(true)
ok dumps of Client (options)
bool(true)
ok phpinfo() with distlock.password set
-- bad port
ok new Client(bad URI)
ok new Client(bad URI, password option)
ok distributedLock with a bad distlock.servers
ok phpinfo() with a bad distlock.servers
-- unreachable
ok dumps of an unreachable Client
ok tryLock on an unreachable server
ok tryLock on an unroutable address
ok lock() with the password in the options
ok distributedLock on an unreachable server
ok distributedUnlock on an unreachable server
-- wrong password for the ACL user
ok tryLock refused
-- passwords the list parser cuts up or quotes in pieces
ok a password with '%40'
ok a password with ','
ok a password with ' '
ok a password with '@'
ok a password with '/'
ok a sentinel-style URI
ok phpinfo() of a sentinel-style URI
ok an empty entry quotes the whole list
-- uncaught, and php --ri, in a child process
ok uncaught ConfigurationException
ok php --ri distlock
