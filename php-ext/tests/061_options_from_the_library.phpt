--TEST--
distlock options: names, ranges and types are the library's table; each mistake gets the library's message (options array and INI)
--EXTENSIONS--
distlock
--FILE--
<?php
use Distlock\Client;

// Nothing here connects: a client is made lazily, and each of these fails first.
$uri = 'redis://127.0.0.1:1';
foreach ([
    'unknown name'        => fn() => new Client($uri, ['nope' => 1]),
    'near name'           => fn() => new Client($uri, ['wait_replica' => 1]),
    'out of range'        => fn() => new Client($uri, ['wait_replicas' => 65]),
    'below range'         => fn() => new Client($uri, ['connect_timeout_ms' => 0]),
    'string for integer'  => fn() => new Client($uri, ['wait_replicas' => 'x']),
    'integer for string'  => fn() => new Client($uri, ['username' => 5]),
    'array'               => fn() => new Client($uri, ['username' => []]),
    'label too long'      => fn() => new Client($uri, ['owner_label' => str_repeat('x', 257)]),
] as $name => $f) {
    try { $f(); echo "$name: no error\n"; }
    catch (Throwable $e) { echo "$name: ", get_class($e), ': ', $e->getMessage(), "\n"; }
}
// Good values are taken: an int, its text, a bool for a 0/1 option.
new Client($uri, ['wait_replicas' => 2, 'wait_timeout_ms' => '250', 'stats' => false,
                  'drift_ppm' => 0, 'retry_max_ms' => 50]);
echo "good values: ok\n";
// The INI entries are the same table: distlock.<name>, checked by the library.
ini_set('distlock.servers', $uri);
ini_set('distlock.wait_replicas', '65');
try { distributedLock('k', 10); echo "ini out of range: no error\n"; }
catch (Throwable $e) { echo "ini out of range: ", get_class($e), ': ', $e->getMessage(), "\n"; }
ini_set('distlock.wait_replicas', 'x');
try { new Client(); echo "ini string for integer: no error\n"; }
catch (Throwable $e) { echo "ini string for integer: ", get_class($e), ': ', $e->getMessage(), "\n"; }
ini_set('distlock.wait_replicas', '');
ini_set('distlock.owner_info', 'On');   // php.ini's switch spelling
new Client();
echo "ini On: ok\n";
var_dump(ini_get('distlock.drift_ppm'), ini_get('distlock.nope'));
?>
--EXPECT--
unknown name: ValueError: Distlock\Client::__construct(): Argument #2 ($options) has an unknown option "nope"
near name: ValueError: Distlock\Client::__construct(): Argument #2 ($options) has an unknown option "wait_replica" (did you mean "wait_replicas"?)
out of range: Distlock\ConfigurationException: distlock: invalid client option: option "wait_replicas": value 65 out of range 0..64
below range: Distlock\ConfigurationException: distlock: invalid client option: option "connect_timeout_ms": value 0 out of range 1..3600000
string for integer: Distlock\ConfigurationException: distlock: invalid client option: option "wait_replicas" takes an integer, got "x"
integer for string: Distlock\ConfigurationException: distlock: invalid client option: option "username" takes a string, not an integer
array: TypeError: Distlock\Client::__construct(): Argument #2 ($options) option "username" must be of type int|string|bool, array given
label too long: Distlock\ConfigurationException: distlock: invalid client option: option "owner_label": 257 bytes, at most 256
good values: ok
ini out of range: Distlock\ConfigurationException: distlock: invalid client option: option "wait_replicas": value 65 out of range 0..64
ini string for integer: Distlock\ConfigurationException: distlock: invalid client option: option "wait_replicas" takes an integer, got "x"
ini On: ok
string(0) ""
bool(false)
