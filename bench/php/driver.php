<?php
/*
 * PHP bench driver: the same protocol as bench/c/common.h.
 *   php driver.php IMPL pairs   URIS START_NS SLICE_NS PERIOD_NS COUNT KEY
 *   php driver.php IMPL contend URIS START_NS END_NS KEY HOLD_US THINK_US LOG MARKER ID
 *   php driver.php IMPL hold    URIS COUNT TTL_MS
 *   php driver.php IMPL wake    URIS KEY ROLE    (ROLE holder | waiter; see wake_loop())
 * IMPL: seed | symfony | symfony-combined | laravel | distlock-compat | distlock-oo
 *       | distlock-symfony | distlock-laravel
 *
 * seed is the ERP userland pair (seeds/000, "Redis 分布式锁在 ERP 应用") copied
 * verbatim on phpredis; it cannot wait, so a contended caller retries after
 * usleep(100 ms), the interval symfony/lock uses for stores that cannot block.
 */

final class Seed
{
    private $redis;
    public function __construct($redis) { $this->redis = $redis; }
    private function getRedis() { return $this->redis; }

    // ---- verbatim from the seed (only `public function` context kept)
    public function distributedLock($key = '', $ttl = 60, $random = null, $tipMsg = '')
    {
        $redis = $this->getRedis();
        $tipMsg = $tipMsg != '' ? $tipMsg : '请求过于频繁,相同业务单号' . $ttl . '秒内仅允许请求1次!';
        $random = $random ? $random : mt_rand(0, 9999999);
        $optional = array('NX', 'EX' => $ttl);
        $rs = $redis->set($key, $random, $optional);
        if (!$rs) {
            $tipMsg = $tipMsg != '' ? $tipMsg : '请求过于频繁,相同业务单号' . $ttl . '秒内仅允许请求1次!';
            throw new Exception($tipMsg, 500002);
        }
        return $random;
    }
    public function distributedUnlock($key = '', $random = 0)
    {
        $redis = $this->getRedis();
        $lua = <<<EOF
            if redis.call("get", KEYS[1]) == ARGV[1] then
                return redis.call("del", KEYS[1])
            else
                return 0
            end
EOF;
        $args = array($key, $random);
        $rs = $redis->eval($lua, $args, 1);
        if ($rs == 1) {
            $ret = true;
        } else {
            $ret = 1;
        }
        return $ret;
    }
}

function parse_uris(string $uris): array
{
    $out = [];
    foreach (explode(',', $uris) as $u) {
        $p = parse_url($u);
        $out[] = [$p['host'], $p['port']];
    }
    return $out;
}

function phpredis(array $hp): Redis
{
    $r = new Redis();
    $r->connect($hp[0], $hp[1]);
    return $r;
}

/* Every implementation is reduced to three closures:
 *   try(key, ttl_ms) -> handle|null   one attempt, never waits
 *   wait(key, ttl_ms) -> handle       waits as the library does by default
 *   release(handle)   -> bool         true when it was still ours */
function make_impl(string $impl, string $uris): array
{
    $nodes = parse_uris($uris);
    switch ($impl) {
    case 'seed':
        $s = new Seed(phpredis($nodes[0]));
        $try = function ($key, $ttl) use ($s) {
            try { return [$key, $s->distributedLock($key, intdiv($ttl, 1000))]; }
            catch (Exception $e) { if ($e->getCode() !== 500002) throw $e; return null; }
        };
        return [
            'try' => $try,
            'wait' => function ($key, $ttl) use ($try) {
                while (!($h = $try($key, $ttl))) usleep(100000);
                return $h;
            },
            'release' => function ($h) use ($s) { return $s->distributedUnlock($h[0], $h[1]) === true; },
            'version' => phpversion('redis'),
        ];
    case 'symfony':
    case 'symfony-combined':
        require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';
        if ($impl === 'symfony') {
            $store = new Symfony\Component\Lock\Store\RedisStore(phpredis($nodes[0]));
        } else {
            $stores = [];
            foreach ($nodes as $n) $stores[] = new Symfony\Component\Lock\Store\RedisStore(phpredis($n));
            $store = new Symfony\Component\Lock\Store\CombinedStore(
                $stores, new Symfony\Component\Lock\Strategy\ConsensusStrategy());
        }
        $factory = new Symfony\Component\Lock\LockFactory($store);
        return [
            'try' => function ($key, $ttl) use ($factory) {
                $l = $factory->createLock($key, $ttl / 1000, false);
                return $l->acquire(false) ? $l : null;
            },
            'wait' => function ($key, $ttl) use ($factory) {
                $l = $factory->createLock($key, $ttl / 1000, false);
                $l->acquire(true);
                return $l;
            },
            'release' => function ($l) { $l->release(); return true; },
        ];
    case 'laravel':
    case 'distlock-laravel':
        // What Cache::lock() runs: the Repository forwards lock() to its store.
        // The peer is Laravel's RedisStore on a phpredis connection (its
        // PhpRedisLock); the adapter is our LockProvider on a Distlock\Client.
        require_once '/usr/share/php/Illuminate/Cache/autoload.php';
        if ($impl === 'laravel') {
            require_once '/usr/share/php/Illuminate/Redis/autoload.php';
            $manager = new Illuminate\Redis\RedisManager(null, 'phpredis', ['default' => [
                'host' => $nodes[0][0], 'port' => $nodes[0][1], 'database' => 0]]);
            $store = new Illuminate\Cache\RedisStore($manager, '', 'default');
        } else {
            if (!extension_loaded('distlock')) throw new RuntimeException('distlock extension not loaded');
            require_once adapters_autoload();
            $store = new Distlock\Laravel\DistlockStore(new Distlock\Client($uris));
        }
        $cache = new Illuminate\Cache\Repository($store);
        // Laravel's locks take whole seconds
        $secs = function ($ttl) { return max(1, intdiv($ttl + 999, 1000)); };
        return [
            'try' => function ($key, $ttl) use ($cache, $secs) {
                $l = $cache->lock($key, $secs($ttl));
                return $l->get() ? $l : null;
            },
            // block() with its default 250 ms sleep between attempts (the peer)
            'wait' => function ($key, $ttl) use ($cache, $secs) {
                $l = $cache->lock($key, $secs($ttl));
                $l->block(30);
                return $l;
            },
            'release' => function ($l) { return (bool) $l->release(); },
        ];
    case 'distlock-symfony':
        if (!extension_loaded('distlock')) throw new RuntimeException('distlock extension not loaded');
        require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';
        require_once adapters_autoload();
        $factory = new Symfony\Component\Lock\LockFactory(
            new Distlock\Symfony\DistlockStore(new Distlock\Client($uris)));
        return [
            'try' => function ($key, $ttl) use ($factory) {
                $l = $factory->createLock($key, $ttl / 1000, false);
                return $l->acquire(false) ? $l : null;
            },
            'wait' => function ($key, $ttl) use ($factory) {
                $l = $factory->createLock($key, $ttl / 1000, false);
                $l->acquire(true);
                return $l;
            },
            'release' => function ($l) { $l->release(); return true; },
        ];
    case 'distlock-compat':
        if (!extension_loaded('distlock')) throw new RuntimeException('distlock extension not loaded');
        ini_set('distlock.servers', $uris);
        $try = function ($key, $ttl) {
            try { return [$key, distributedLock($key, intdiv($ttl, 1000))]; }
            catch (Exception $e) { if ($e->getCode() !== 500002) throw $e; return null; }
        };
        return [
            'try' => $try,
            'wait' => function ($key, $ttl) use ($try) {
                while (!($h = $try($key, $ttl))) usleep(100000);
                return $h;
            },
            'release' => function ($h) { return distributedUnlock($h[0], $h[1]) === true; },
        ];
    case 'distlock-oo':
        if (!extension_loaded('distlock')) throw new RuntimeException('distlock extension not loaded');
        return distlock_oo_impl($uris);
    }
    throw new InvalidArgumentException("unknown impl $impl");
}

require __DIR__ . '/distlock_oo.php';

/* The PHP adapters' autoloader of this checkout (php-adapters/autoload.php),
 * or DISTLOCK_ADAPTERS_AUTOLOAD (an installed copy). */
function adapters_autoload(): string
{
    $f = getenv('DISTLOCK_ADAPTERS_AUTOLOAD') ?: dirname(__DIR__, 2) . '/php-adapters/autoload.php';
    if (!is_file($f)) throw new RuntimeException("no PHP adapters: $f missing");
    return $f;
}

function pct(array $v, float $p): float
{
    if (!$v) return -1;
    sort($v);
    return $v[(int) round($p * (count($v) - 1))] / 1000.0;
}

function cpu_ns(): int
{
    $r = getrusage();
    return ($r['ru_utime.tv_sec'] + $r['ru_stime.tv_sec']) * 1000000000
        + ($r['ru_utime.tv_usec'] + $r['ru_stime.tv_usec']) * 1000;
}

function wait_until(int $t): int
{
    $n = hrtime(true);
    if ($n > $t) return 1;
    usleep(intdiv($t - $n, 1000));
    return 0;
}

/* Wait-to-wake latency, one process per role, driven line by line on stdin
 * by bench.py (run_wake):
 *   holder: "hold"    -> takes KEY (one attempt), prints "held"
 *           "release" -> prints "released t_ns=T ok=0|1", T read just before release()
 *   waiter: "wait"    -> prints "waiting", then blocks in wait(KEY) as the
 *                        library does by default; once it holds KEY it reads
 *                        the clock, releases, prints "acquired t_ns=T ok=0|1"
 * Both first take and release KEY:warm:ROLE once, so every connection (and the
 * library's own setup) exists before the first measured wait. */
function wake_loop(array $I, string $key, string $role): void
{
    $try = $I['try']; $wait = $I['wait']; $rel = $I['release'];
    $w = $try("$key:warm:$role", 30000);
    if (!$w || !$rel($w)) { fwrite(STDERR, "warm-up pair on $key:warm:$role failed\n"); exit(1); }
    echo "ready held=0\n";
    $h = null;
    while (($line = fgets(STDIN)) !== false) {
        $cmd = trim($line);
        if ($role === 'holder' && $cmd === 'hold') {
            $h = $try($key, 30000);
            echo $h ? "held\n" : "failed: $key not free\n";
        } elseif ($role === 'holder' && $cmd === 'release') {
            $t = hrtime(true);
            $ok = $h ? (int) $rel($h) : 0;
            $h = null;
            echo "released t_ns=$t ok=$ok\n";
        } elseif ($role === 'waiter' && $cmd === 'wait') {
            echo "waiting\n";
            $g = $wait($key, 30000);
            $t = hrtime(true);
            $ok = (int) $rel($g);
            echo "acquired t_ns=$t ok=$ok\n";
        } elseif ($cmd === 'quit') {
            return;
        } else {
            echo "failed: unknown command '$cmd' for $role\n";
        }
    }
}

$impl = $argv[1];
$mode = $argv[2];
$I = make_impl($impl, $argv[3]);

if ($mode === 'pairs') {
    // windows k: [START + k*PERIOD, +SLICE), taking turns with the other
    // implementations of the group (see bench/c/common.h)
    [$start, $slice, $period, $count, $key] =
        [(int) $argv[4], (int) $argv[5], (int) $argv[6], (int) $argv[7], $argv[8]];
    $try = $I['try']; $rel = $I['release'];
    for ($w = 0; $w < 100; $w++) { $h = $try($key, 30000); $rel($h); }
    $lat = []; $counts = []; $errors = 0; $late = 0; $cpu = 0;
    for ($k = 0; $k < $count; $k++) {
        $ws = $start + $k * $period; $we = $ws + $slice;
        if (hrtime(true) >= $we) { $counts[] = -1; $late = 1; continue; }
        wait_until($ws);
        $pairs = 0;
        $c0 = cpu_ns();
        while (($t = hrtime(true)) < $we) {
            $h = $try($key, 30000);
            $lat[] = hrtime(true) - $t;
            if (!$h) { $errors++; continue; }
            if (!$rel($h)) { $errors++; continue; }
            $pairs++;
        }
        $cpu += cpu_ns() - $c0;
        $counts[] = $pairs;
    }
    printf("impl=%s slice_s=%.6f p50_us=%.1f p99_us=%.1f late=%d errors=%d cpu_ns=%d pairs=%s\n",
        $impl, $slice / 1e9, pct($lat, 0.5), pct($lat, 0.99), $late, $errors, $cpu, implode(',', $counts));
} elseif ($mode === 'contend') {
    [$start, $end, $key, $hold, $think, $logf, $markf, $id] =
        [(int) $argv[4], (int) $argv[5], $argv[6], (int) $argv[7], (int) $argv[8], $argv[9], $argv[10], (int) $argv[11]];
    $wait = $I['wait']; $rel = $I['release'];
    $m = fopen($markf, 'c+');
    $overlaps = 0; $errors = 0; $log = [];
    $late = wait_until($start);
    while (hrtime(true) < $end) {
        $treq = hrtime(true);
        $h = $wait($key, 10000);
        $tacq = hrtime(true);
        fseek($m, 0); $v = fread($m, 8);
        if (strlen($v) === 8 && unpack('q', $v)[1] !== 0) $overlaps++;
        fseek($m, 0); fwrite($m, pack('q', $id)); fflush($m);
        usleep($hold);
        fseek($m, 0); $v = fread($m, 8);
        if (unpack('q', $v)[1] !== $id) $overlaps++;
        fseek($m, 0); fwrite($m, pack('q', 0)); fflush($m);
        $trel = hrtime(true);
        if (!$rel($h)) $errors++;
        $log[] = "$treq $tacq $trel\n";
        if ($think > 0) usleep($think);
    }
    file_put_contents($logf, implode('', $log));
    printf("impl=%s cs=%d overlaps=%d late=%d errors=%d\n", $impl, count($log), $overlaps, $late, $errors);
} elseif ($mode === 'hold') {
    [$count, $ttl] = [(int) $argv[4], (int) $argv[5]];
    $try = $I['try']; $held = [];
    for ($i = 0; $i < $count; $i++) if ($h = $try("bench:hold:$i", $ttl)) $held[] = $h;
    printf("ready held=%d\n", count($held));
    fgets(STDIN);
} elseif ($mode === 'wake') {
    wake_loop($I, $argv[4], $argv[5]);
} else {
    fwrite(STDERR, "unknown mode $mode\n");
    exit(2);
}
