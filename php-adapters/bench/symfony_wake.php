<?php
/*
 * Release-to-taken latency of a symfony/lock Lock::acquire(true), on
 * DistlockStore (woken by the release) or RedisStore (symfony's Lock retries
 * save() every 100 +- 10 ms): the figures of docs/symfony.md.
 *
 *   php -d extension=php-ext/build/ext/modules/distlock.so \
 *       php-adapters/bench/symfony_wake.php redis://127.0.0.1:6379 distlock|redis [TRIALS]
 *
 * Needs phpredis and pcntl. Each trial: this process holds the lock, a child
 * waits in acquire(true), the holder releases 300 ms after the child started
 * waiting, the child records when it got the lock.
 */

declare(strict_types=1);

require __DIR__ . '/../autoload.php';

use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\RedisStore;

[, $uri, $which] = $argv;
$trials = (int) ($argv[3] ?? 50);
$p = parse_url($uri);
$redis = static function () use ($p): Redis {
    $r = new Redis();
    $r->connect($p['host'], $p['port']);

    return $r;
};
$factory = static fn (): LockFactory => new LockFactory($which === 'distlock'
    ? new Distlock\Symfony\DistlockStore(new Distlock\Client($uri), 60.0)
    : new RedisStore($redis(), 60.0));

$r = $redis();
$lat = [];
for ($i = 0; $i < $trials; $i++) {
    $res = "bench:wake:$which:" . bin2hex(random_bytes(4));
    $lock = $factory()->createLock($res, 60.0);
    $lock->acquire();
    $pid = pcntl_fork();
    if ($pid === 0) {
        $rr = $redis();
        $rr->set("$res:waiting", '1');
        $mine = $factory()->createLock($res, 60.0);
        $mine->acquire(true);
        $rr->set("$res:taken", (string) microtime(true));
        $mine->release();
        exit(0);
    }
    while (!$r->exists("$res:waiting")) {
        usleep(1000);
    }
    usleep(300000);   // the release falls inside the child's wait, not at its start
    $t0 = microtime(true);
    $lock->release();
    pcntl_waitpid($pid, $status);
    $lat[] = ((float) $r->get("$res:taken") - $t0) * 1000;
    $r->del("$res:waiting", "$res:taken");
}
sort($lat);
printf("%s: %d trials, release to taken p50 %.1f ms, p90 %.1f ms, max %.1f ms\n", $which, count($lat),
    $lat[intdiv(count($lat), 2)], $lat[(int) (count($lat) * 0.9)], end($lat));
