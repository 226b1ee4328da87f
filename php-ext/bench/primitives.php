<?php
/*
 * The three primitives through the extension, next to a plain lock, on the
 * servers of argv[1] (one URI or a Redlock list):
 *   1. acquire + release pairs per second of a lock, a read lock
 *      (Client::SHARED), a permit of a semaphore of 4 and a set of 4 keys
 *      (tryLockMany), one client, alternating rounds, the median round;
 *   2. hand-over: a child process holds the lease and releases it once the
 *      parent waits (subscribed on the key's channel); the time from the
 *      child's release() call to the parent's grant (hrtime: CLOCK_MONOTONIC,
 *      one clock for both processes).
 *   php -d extension=distlock.so primitives.php URIS [PAIRS] [ROUNDS] [HANDOVERS]
 */
use Distlock\Client;

[$uri, $pairs, $rounds, $handovers] = [$argv[1], (int)($argv[2] ?? 2000), (int)($argv[3] ?? 5),
                                       (int)($argv[4] ?? 40)];
$c = new Client($uri);
$set = fn($k) => ["$k:1", "$k:2", "$k:3", "$k:4"];
$kinds = [
    'lock'           => [fn($c, $k) => $c->tryLock($k, 10), fn($c, $k) => $c->lock($k, 10, 5.0), "%s"],
    'read lock'      => [fn($c, $k) => $c->tryLock($k, 10, Client::SHARED),
                         fn($c, $k) => $c->lock($k, 10, 5.0), "%s"],   // hand-over: reader -> writer
    'permit (P = 4)' => [fn($c, $k) => $c->trySemaphore($k, 4, 10),
                         fn($c, $k) => $c->semaphore($k, 1, 10, 5.0), "%s"],
    'set of 4 keys'  => [fn($c, $k) => $c->tryLockMany($set($k), 10),
                         fn($c, $k) => $c->lockMany($set($k), 10, 5.0), "%s:1"],
];
$median = function (array $v): float { sort($v); return $v[intdiv(count($v), 2)]; };

echo "servers: ", implode(',', $c->servers()), "\n";
$rates = [];
for ($r = 0; $r < $rounds; $r++) {
    foreach ($kinds as $name => [$take]) {
        $k = 'bench:prim:' . $name;
        $t0 = hrtime(true);
        for ($i = 0; $i < $pairs; $i++) {
            $l = $take($c, $k);
            if ($l === null || !$l->release()) {
                fwrite(STDERR, "$name: not acquired or not released\n");
                exit(1);
            }
        }
        $rates[$name][] = $pairs / ((hrtime(true) - $t0) / 1e9);
    }
}
$lock = $median($rates['lock']);
foreach ($rates as $name => $v) {
    printf("%-15s %7.0f pairs/s (%.2fx a lock; median of %d rounds of %d)\n", $name, $median($v),
           $median($v) / $lock, $rounds, $pairs);
}

// Hand-over: for the permit, the child takes the only permit of P = 1.
$kinds['permit (P = 4)'][0] = fn($c, $k) => $c->trySemaphore($k, 1, 10);
$p = parse_url(explode(',', $uri)[0]);
$redis = function () use ($p) { $r = new Redis(); $r->connect($p['host'], $p['port']); return $r; };
$r = $redis();
foreach ($kinds as $name => [$take, $wait, $chan]) {
    $lat = [];
    for ($i = 0; $i < $handovers; $i++) {
        $k = 'bench:handover:' . bin2hex(random_bytes(6));
        $ch = 'distlock:' . sprintf($chan, $k);
        $pid = pcntl_fork();
        if ($pid === 0) {
            $cc = new Client($uri);
            $rr = $redis();
            $l = $take($cc, $k);
            $rr->set("$k:state", 'held');
            while (($rr->pubsub('numsub', [$ch])[$ch] ?? 0) < 1) {
                usleep(500);
            }
            $rr->set("$k:t0", (string)hrtime(true));
            exit($l->release() ? 0 : 1);
        }
        while ($r->get("$k:state") !== 'held') {
            usleep(500);
        }
        $l = $wait($c, $k);
        $t1 = hrtime(true);
        pcntl_waitpid($pid, $status);
        $lat[] = ($t1 - (int)$r->get("$k:t0")) / 1e6;
        $l->release();
        $r->del("$k:state", "$k:t0");
    }
    sort($lat);
    printf("%-15s release -> waiter granted: p50 %.2f ms, p90 %.2f ms, max %.2f ms (%d hand-overs%s)\n",
           $name === 'permit (P = 4)' ? 'permit (P = 1)' : $name, $lat[intdiv(count($lat), 2)],
           $lat[(int)(count($lat) * 0.9)], end($lat), count($lat),
           $name === 'read lock' ? ', reader -> writer' : '');
}
