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
