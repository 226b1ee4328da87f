<?php
/*
 * What the Symfony store's tests share: stores on the servers run.sh started,
 * a fresh resource name per test, phpredis to look at the keys, and a second
 * PHP process that waits on a lock (fixtures/waiter.php).
 */

declare(strict_types=1);

namespace Distlock\Tests\Symfony;

use Distlock\Client;
use Distlock\Symfony\DistlockStore;
use PHPUnit\Framework\TestCase;

abstract class StoreTestCase extends TestCase
{
    /** @var list<Waiter> */
    private array $waiters = [];

    protected function tearDown(): void
    {
        foreach ($this->waiters as $w) {
            $w->kill();
        }
        $this->waiters = [];
    }

    /** The node counts each behaviour runs on: one server and a Redlock of three. */
    public static function nodeCounts(): array
    {
        return ['1 node' => [1], '3 nodes' => [3]];
    }

    /** A store on a client connected to every node: the tests check each node's keys. */
    protected function store(int $nodes = 1, float $initialTtl = 300.0): DistlockStore
    {
        $client = new Client(distlock_test_servers($nodes));
        distlock_test_connect_every_node($client, $nodes);

        return new DistlockStore($client, $initialTtl);
    }

    protected function resource(): string
    {
        return 'symfony-test:' . bin2hex(random_bytes(8));
    }

    /** phpredis connections to each server of the group of $nodes. */
    protected function redisNodes(int $nodes = 1): array
    {
        $out = [];
        foreach (explode(',', distlock_test_servers($nodes)) as $uri) {
            $p = parse_url($uri);
            $r = new \Redis();
            $r->connect($p['host'], $p['port']);
            $out[] = $r;
        }

        return $out;
    }

    /** Polls $cond until it holds or $seconds pass; whether it held. */
    protected static function waitFor(callable $cond, float $seconds = 10.0): bool
    {
        $deadline = microtime(true) + $seconds;
        do {
            if ($cond()) {
                return true;
            }
            usleep(10000);
        } while (microtime(true) < $deadline);

        return (bool) $cond();
    }

    /**
     * A second process that takes $resource with the mode's call (fixtures/waiter.php):
     * store-write (waitAndSave), store-read (waitAndSaveRead), lock-write
     * (LockFactory, acquire(true)), lock-read (acquireRead(true)).
     */
    protected function startWaiter(string $resource, string $mode, int $nodes = 1): Waiter
    {
        $w = new Waiter($resource, $mode, distlock_test_servers($nodes));
        $this->waiters[] = $w;

        return $w;
    }

    /**
     * Whether $check(\Redis) holds on every node of the group of $nodes,
     * waiting for it (3 s at most): a save, refresh or delete returns once a
     * quorum answered, the last node's write may still be on its way.
     */
    protected function onEveryNode(int $nodes, callable $check): bool
    {
        $rs = $this->redisNodes($nodes);

        return self::waitFor(fn (): bool => count(array_filter($rs, $check)) === count($rs), 3.0);
    }

    /**
     * Until a process subscribed to $resource's release channel on every
     * node of the group (the wait of a waiter is then under way), or 10 s.
     */
    protected function waitUntilSomeoneWaitsOn(string $resource, int $nodes = 1): bool
    {
        $channel = 'distlock:' . $resource;

        return self::waitFor(function () use ($channel, $nodes): bool {
            foreach ($this->redisNodes($nodes) as $r) {
                if (($r->pubsub('numsub', [$channel])[$channel] ?? 0) < 1) {
                    return false;
                }
            }

            return true;
        });
    }
}

/** A PHP process running fixtures/waiter.php, driven line by line. */
final class Waiter
{
    /** @var resource */
    private $proc;
    /** @var array<int, resource> */
    private array $pipes = [];
    private string $buffer = '';

    public function __construct(string $resource, string $mode, string $servers)
    {
        $so = (string) getenv('DISTLOCK_TEST_PHP_SO');
        if ($so === '') {
            throw new \RuntimeException('DISTLOCK_TEST_PHP_SO is not set (run php-adapters/tests/run.sh)');
        }
        $cmd = [PHP_BINARY, '-d', 'extension=' . $so, '-d', 'display_errors=stderr', '-d', 'error_reporting=-1',
                __DIR__ . '/fixtures/waiter.php', $servers, $resource, $mode];
        $proc = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $this->pipes);
        if (!is_resource($proc)) {
            throw new \RuntimeException('cannot start ' . implode(' ', $cmd));
        }
        $this->proc = $proc;
        stream_set_blocking($this->pipes[1], false);
    }

    /** The next line the waiter printed within $seconds, or null (none yet). */
    public function line(float $seconds = 10.0): ?string
    {
        $deadline = microtime(true) + $seconds;
        while (($nl = strpos($this->buffer, "\n")) === false) {
            $left = $deadline - microtime(true);
            if ($left < 0) {
                return null;
            }
            $r = [$this->pipes[1]];
            $w = $e = null;
            if (stream_select($r, $w, $e, (int) $left, (int) (fmod($left, 1.0) * 1e6)) > 0) {
                $chunk = fread($this->pipes[1], 8192);
                if ($chunk === '' || $chunk === false) {
                    if (feof($this->pipes[1])) {
                        return null;
                    }
                }
                $this->buffer .= (string) $chunk;
            }
        }
        $line = substr($this->buffer, 0, $nl);
        $this->buffer = substr($this->buffer, $nl + 1);

        return $line;
    }

    /** Tells the waiter to release what it holds and exit; its exit status. */
    public function releaseAndExit(): int
    {
        fwrite($this->pipes[0], "release\n");
        fflush($this->pipes[0]);
        $line = $this->line();
        fclose($this->pipes[0]);
        $err = stream_get_contents($this->pipes[2]);
        $status = proc_close($this->proc);
        $this->proc = null;
        if ($line !== 'released') {
            throw new \RuntimeException("waiter: expected 'released', got " . var_export($line, true) . "; stderr: $err");
        }

        return $status;
    }

    public function kill(): void
    {
        if ($this->proc !== null) {
            proc_terminate($this->proc, 9);
            proc_close($this->proc);
            $this->proc = null;
        }
    }
}
