--TEST--
distlock: phpinfo() shows distlock.servers masked at least as much as the library's messages mask it
--EXTENSIONS--
distlock
--FILE--
<?php
// The library's rule (docs/errors.md): everything between "scheme://" and
// the entry's last '@' is masked, and the value of every query parameter
// that is not a known non-secret option, whatever its name's spelling.
foreach (['redis://S3CRETPW@127.0.0.1:6379',
          'redis-sentinel://h1:26379/m?sentinel_p%61ssword=S3CRETPW',
          'redis-sentinel://h1:26379/m?auth=S3CRETPW'] as $s) {
    ini_set('distlock.servers', $s);
    ob_start();
    phpinfo(INFO_MODULES);
    $shown = '';
    foreach (explode("\n", ob_get_clean()) as $line) {
        if (str_contains($line, 'distlock.servers')) {
            $shown = $line;
        }
    }
    echo $shown, "\n";
    var_dump(str_contains($shown, 'S3CRETPW'));
}
?>
--EXPECTF--
distlock.servers => %s
bool(false)
distlock.servers => %s
bool(false)
distlock.servers => %s
bool(false)
