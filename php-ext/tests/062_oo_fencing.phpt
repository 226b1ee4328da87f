--TEST--
distlock OO: fencing tokens strictly increase across successive owners (one node and Redlock)
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDLOCK')) die('skip DISTLOCK_TEST_REDLOCK not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
use Distlock\Client;
require __DIR__ . '/fixtures/common.inc';

foreach (['single' => dl_test_uri(), 'redlock' => implode(',', dl_test_redlock())] as $name => $servers) {
    $c = new Client($servers);
    $other = new Client($servers, ['command_timeout_ms' => 400]);  // a second client configuration
    $k = dl_test_key("fence-$name");
    $prev = -1;
    $ok = true;
    for ($i = 0; $i < 20; $i++) {
        $l = ($i % 2 ? $other : $c)->tryLock($k, 10, Client::FENCING);
        $f = $l->fence();
        if (!is_int($f) || $f <= $prev) { $ok = false; echo "not increasing: $prev then ", var_export($f, true), "\n"; }
        $prev = $f;
        if ($i % 3 === 0) { $l->release(); } else { unset($l); }   // released either way
    }
    echo "$name: ", $ok ? 'strictly increasing' : 'BROKEN', "\n";
    // Without FENCING there is no fence.
    $l = $c->tryLock($k, 10);
    var_dump($l->fence());
    $l->release();
}
?>
--EXPECT--
single: strictly increasing
NULL
redlock: strictly increasing
NULL
