--TEST--
Distlock\Client::options() is the library's option table: every INI entry distlock.<name>, and the ranges and types the library enforces
--EXTENSIONS--
distlock
--FILE--
<?php
use Distlock\Client;

$opts = Client::options();
// The same names as the INI entries made from the table (distlock.servers is the extension's own).
$ini = array_map(fn($k) => substr($k, strlen('distlock.')), array_keys(ini_get_all('distlock')));
$ini = array_values(array_diff($ini, ['servers']));
sort($ini);
$names = array_keys($opts);
sort($names);
var_dump($names === $ini, count($opts) > 0);
var_dump($opts['wait_replicas']);
var_dump($opts['owner_label']['type'], $opts['owner_label']['default']);

// Each row is what the library enforces: nothing here connects (clients are lazy).
$uri = 'redis://127.0.0.1:1';
$bad = 0;
foreach ($opts as $name => $o) {
    if (array_keys($o) !== ['type', 'min', 'max', 'default', 'summary'] || $o['summary'] === '') {
        echo "$name: row ", json_encode($o), "\n"; $bad++;
        continue;
    }
    if ($o['type'] === 'int') {
        foreach ([$o['min'], $o['max'], $o['default']] as $v) {
            try { new Client($uri, [$name => $v]); }
            catch (Throwable $e) { echo "$name = $v refused: ", $e->getMessage(), "\n"; $bad++; }
        }
        foreach ([$o['min'] - 1, $o['max'] + 1] as $v) {
            try { new Client($uri, [$name => $v]); echo "$name = $v taken\n"; $bad++; }
            catch (Distlock\ConfigurationException $e) {
                if (!str_contains($e->getMessage(), "out of range {$o['min']}..{$o['max']}")) {
                    echo "$name = $v: ", $e->getMessage(), "\n"; $bad++;
                }
            }
        }
    } elseif ($o['type'] === 'string') {
        try { new Client($uri, [$name => str_repeat('x', $o['max'] + 1)]); echo "$name: too long taken\n"; $bad++; }
        catch (Distlock\ConfigurationException $e) {
            if (!str_contains($e->getMessage(), "at most {$o['max']}")) { echo "$name: ", $e->getMessage(), "\n"; $bad++; }
        }
        try { new Client($uri, [$name => 5]); echo "$name: an int taken\n"; $bad++; }
        catch (Distlock\ConfigurationException $e) {}
    } else {
        echo "$name: type {$o['type']}\n"; $bad++;
    }
}
echo "rows checked against the library: ", count($opts), ", wrong: $bad\n";
?>
--EXPECTF--
bool(true)
bool(true)
array(5) {
  ["type"]=>
  string(3) "int"
  ["min"]=>
  int(0)
  ["max"]=>
  int(64)
  ["default"]=>
  int(0)
  ["summary"]=>
  string(%d) "%s"
}
string(6) "string"
NULL
rows checked against the library: %d, wrong: 0
