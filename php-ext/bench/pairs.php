<?php
// lock+unlock pairs per second: the extension's distributedLock()/distributedUnlock()
// against the seed's userland pair over phpredis, same server, same run.
//
//   php -d extension=/path/distlock.so php-ext/bench/pairs.php redis://127.0.0.1:PORT [PAIRS] [ROUNDS] [--json]
//
// Both sides make two round trips per pair (SET NX EX / EVAL(SHA) compare-and-delete).
// The sides alternate in ROUNDS rounds so drift on the machine hits both alike;
// each pair uses a fresh key and checks the results, so a broken pair cannot
// count as a fast one. Also measured: the OO API (tryLock + release), and the
// CPU each pair costs the PHP process (getrusage) and redis-server (INFO cpu).
require __DIR__ . '/../tests/fixtures/seed_userland.php';
require __DIR__ . '/../tests/fixtures/erp_counter.php';

$argv2 = array_values(array_filter($argv, fn($a) => $a !== '--json'));
$json = in_array('--json', $argv, true);
$uri = $argv2[1] ?? getenv('DISTLOCK_TEST_REDIS');
if (!$uri) {
    fwrite(STDERR, "usage: php -d extension=distlock.so pairs.php redis://127.0.0.1:PORT [PAIRS] [ROUNDS] [--json]\n");
    exit(2);
}
$pairs = (int)($argv2[2] ?? 20000);
$rounds = max(1, (int)($argv2[3] ?? 5));
putenv("DISTLOCK_TEST_REDIS=$uri");
ini_set('distlock.servers', $uri);

$seed = new Seed_RequestCounter();
$ext = new Process_RequestCounter();
$client = new Distlock\Client($uri);
$prefix = 'bench:pairs:' . getmypid() . ':';

$sides = [
    'extension' => function (int $n, string $p) {
        for ($i = 0; $i < $n; $i++) {
            $t = distributedLock($p . $i, 60);
            if (distributedUnlock($p . $i, $t) !== true) {
                throw new RuntimeException('extension: unlock failed');
            }
        }
    },
    'seed-userland' => function (int $n, string $p) use ($seed) {
        for ($i = 0; $i < $n; $i++) {
            $t = $seed->distributedLock($p . $i, 60);
            if ($seed->distributedUnlock($p . $i, $t) !== true) {
                throw new RuntimeException('seed: unlock failed');
            }
        }
    },
    'extension-oo' => function (int $n, string $p) use ($client) {
        for ($i = 0; $i < $n; $i++) {
            $l = $client->tryLock($p . $i, 60.0);
            if ($l === null || $l->release() !== true) {
                throw new RuntimeException('oo: release failed');
            }
        }
    },
];

// Warm up: connections made, scripts cached.
foreach ($sides as $name => $f) {
    $f(200, $prefix . "warm:$name:");
}
$time = array_fill_keys(array_keys($sides), 0.0);
$cpu = array_fill_keys(array_keys($sides), 0.0);
$srv = array_fill_keys(array_keys($sides), 0.0);
$probe = dl_test_phpredis($uri);
$serverCpu = function () use ($probe): float {
    $i = $probe->info('cpu');
    return (float)$i['used_cpu_user'] + (float)$i['used_cpu_sys'];
};
$rusage = function (): float {
    $u = getrusage();
    return $u['ru_utime.tv_sec'] + $u['ru_utime.tv_usec'] / 1e6 + $u['ru_stime.tv_sec'] + $u['ru_stime.tv_usec'] / 1e6;
};
$per = intdiv($pairs, $rounds);
for ($round = 0; $round < $rounds; $round++) {
    foreach ($sides as $name => $f) {
        $s0 = $serverCpu();
        $t0 = hrtime(true);
        $c0 = $rusage();
        $f($per, $prefix . "$round:$name:");
        $time[$name] += (hrtime(true) - $t0) / 1e9;
        $cpu[$name] += $rusage() - $c0;
        $srv[$name] += $serverCpu() - $s0;
    }
}
$rate = [];
foreach ($time as $name => $s) {
    $rate[$name] = $per * $rounds / $s;
}
$ratio = $rate['extension'] / $rate['seed-userland'];
if ($json) {
    $cpuUs = array_map(fn($c) => $c / ($per * $rounds) * 1e6, $cpu);
    echo json_encode(['pairs' => $per * $rounds, 'rounds' => $rounds, 'pairs_per_s' => $rate,
                      'client_cpu_us_per_pair' => $cpuUs,
                      'server_cpu_us_per_pair' => array_map(fn($c) => $c / ($per * $rounds) * 1e6, $srv),
                      'ratio_extension_vs_seed' => $ratio, 'php' => PHP_VERSION], JSON_PRETTY_PRINT), "\n";
} else {
    printf("lock+unlock pairs, %d per side in %d rounds, server %s\n", $per * $rounds, $rounds, $uri);
    foreach ($rate as $name => $r) {
        printf("  %-14s %9.0f pairs/s  (%.1f us/pair; CPU per pair: PHP %.1f us, redis-server %.1f us)\n",
               $name, $r, 1e6 / $r, $cpu[$name] / ($per * $rounds) * 1e6, $srv[$name] / ($per * $rounds) * 1e6);
    }
    printf("  ratio extension / seed-userland: %.2f\n", $ratio);
}
