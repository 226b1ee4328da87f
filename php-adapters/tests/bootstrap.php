<?php
/*
 * The adapters' test bootstrap. It starts nothing: tests/run.sh starts the
 * redis-servers and passes them in the environment,
 *   DISTLOCK_TEST_SERVERS_1  one server (redis://127.0.0.1:P)
 *   DISTLOCK_TEST_SERVERS_3  three servers, a comma list (Redlock)
 * and loads the extension under test (-d extension=...).
 */

declare(strict_types=1);

if (!extension_loaded('distlock')) {
    fwrite(STDERR, "php-adapters tests: the distlock extension is not loaded (run php-adapters/tests/run.sh)\n");
    exit(1);
}
foreach (['DISTLOCK_TEST_SERVERS_1', 'DISTLOCK_TEST_SERVERS_3'] as $name) {
    if ((string) getenv($name) === '') {
        fwrite(STDERR, "php-adapters tests: $name is not set (run php-adapters/tests/run.sh, which starts the servers)\n");
        exit(1);
    }
}

require __DIR__ . '/../autoload.php';

/** The servers run.sh started: $count is 1 or 3. */
function distlock_test_servers(int $count): string
{
    return (string) getenv('DISTLOCK_TEST_SERVERS_' . $count);
}

/**
 * Connect $client (on the servers of distlock_test_servers($count)) to every
 * node before a test checks what a lock wrote on each: a fresh client's first
 * rounds may end at the quorum before its connection to the last node is
 * ready, and that request is then never sent (the lock is held on a quorum,
 * as promised). Takes and releases a lock of its own key until one lands on
 * every node; throws if none did within $seconds.
 */
function distlock_test_connect_every_node(Distlock\Client $client, int $count, float $seconds = 5.0): void
{
    $nodes = [];
    foreach (explode(',', distlock_test_servers($count)) as $uri) {
        $p = parse_url($uri);
        $r = new Redis();
        $r->connect($p['host'], $p['port']);
        $nodes[] = $r;
    }
    $key = 'connect-every-node:' . bin2hex(random_bytes(8));
    $deadline = microtime(true) + $seconds;
    do {
        $w = $client->tryLock($key, 5);
        $all = $w !== null
            && count(array_filter($nodes, fn(Redis $r) => $r->get($key) === $w->token())) === count($nodes);
        $w?->release();
        if ($all) {
            return;
        }
    } while (microtime(true) < $deadline);
    throw new RuntimeException("a lock of this client never reached all $count nodes in $seconds s");
}
