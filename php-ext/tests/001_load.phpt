--TEST--
distlock: loaded, the compat signatures carry the seed's defaults, INI entries exist (an option's is empty: the library's default)
--EXTENSIONS--
distlock
--FILE--
<?php
foreach (['distributedLock', 'distributedUnlock'] as $fn) {
    $rf = new ReflectionFunction($fn);
    echo $fn, '(';
    echo implode(', ', array_map(fn($p) => $p->getType() . ' $' . $p->getName() . ' = ' . $p->getDefaultValueConstantName() . var_export($p->getDefaultValue(), true), $rf->getParameters()));
    echo '): ', $rf->getReturnType(), "\n";
}
foreach (['distlock.servers', 'distlock.connect_timeout_ms', 'distlock.command_timeout_ms', 'distlock.username', 'distlock.password'] as $ini) {
    var_dump(ini_get($ini));
}
foreach (['Distlock\ConnectionException', 'Distlock\ConfigurationException', 'Distlock\LockLostException', 'Distlock\LockTimeoutException'] as $c) {
    echo $c, ': ', implode(' < ', class_parents($c)), "\n";
}
var_dump(Distlock\Exception::CONNECTION, Distlock\Exception::NO_QUORUM, Distlock\Exception::PROTOCOL);
var_dump(phpversion('distlock'));
?>
--EXPECT--
distributedLock(string $key = '', int|float $ttl = 60, string|int|null $random = NULL, string $tipMsg = ''): string|int
distributedUnlock(string $key = '', string|int $random = 0): int|true
string(22) "redis://127.0.0.1:6379"
string(0) ""
string(0) ""
string(0) ""
string(0) ""
Distlock\ConnectionException: Distlock\Exception < RuntimeException < Exception
Distlock\ConfigurationException: Distlock\Exception < RuntimeException < Exception
Distlock\LockLostException: Distlock\Exception < RuntimeException < Exception
Distlock\LockTimeoutException: Distlock\Exception < RuntimeException < Exception
int(500013)
int(500015)
int(500017)
string(5) "0.1.0"
