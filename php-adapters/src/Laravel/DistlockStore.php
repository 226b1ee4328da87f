<?php
/*
 * A Laravel cache store whose locks are distlock's: Cache::lock() and
 * Cache::restoreLock() (Illuminate\Contracts\Cache\LockProvider) return
 * DistlockLock objects on a Distlock\Client.
 *
 * distlock keeps locks, not values. The Store contract's methods (get, put,
 * ...) go to the cache store given as $cache (config/cache.php: 'cache' =>
 * another store's name), so this store can be the application's default and
 * Cache::get() keeps working; without one they throw a BadMethodCallException
 * that says so.
 */

declare(strict_types=1);

namespace Distlock\Laravel;

use Distlock\Client;
use Illuminate\Contracts\Cache\LockProvider;
use Illuminate\Contracts\Cache\Store;

class DistlockStore implements LockProvider, Store
{
    /** The prefix of every lock's key: '' or "$prefix:", as Laravel's RedisStore names its keys. */
    private string $prefix;

    /**
     * @param Client $client the distlock client the locks are taken on
     * @param string $prefix the cache prefix (config/cache.php 'prefix'): a lock
     *        $name is the key "$prefix:$name" ($name alone when '')
     * @param Store|null $cache the store that keeps values (get, put, ...); null: none
     * @param float $leaseSeconds the TTL of the auto-renewed lease that stands for
     *        Laravel's "no expiry" (a lock of 0 seconds) while its object lives
     */
    public function __construct(
        private Client $client,
        string $prefix = '',
        private ?Store $cache = null,
        private float $leaseSeconds = 60.0,
    ) {
        $this->prefix = $prefix !== '' ? $prefix . ':' : '';
    }

    /**
     * A lock on $name for $seconds (0: no expiry, see DistlockLock), held by
     * $owner (null: a random owner). Nothing is sent until get() or block().
     */
    public function lock($name, $seconds = 0, $owner = null): DistlockLock
    {
        return new DistlockLock($this->client, $this->prefix . $name, $seconds, $owner, $this->leaseSeconds);
    }

    /**
     * The lock $owner holds on $name, e.g. taken by another request: its
     * release() deletes the key only if $owner still holds it.
     */
    public function restoreLock($name, $owner): DistlockLock
    {
        return $this->lock($name, 0, $owner);
    }

    /** The Distlock\Client the locks are taken on (for holder(), stats(), ...). */
    public function getClient(): Client
    {
        return $this->client;
    }

    public function getPrefix()
    {
        return $this->prefix;
    }

    public function get($key)
    {
        return $this->cache('get')->get($key);
    }

    public function many(array $keys)
    {
        return $this->cache('many')->many($keys);
    }

    public function put($key, $value, $seconds)
    {
        return $this->cache('put')->put($key, $value, $seconds);
    }

    public function putMany(array $values, $seconds)
    {
        return $this->cache('putMany')->putMany($values, $seconds);
    }

    public function increment($key, $value = 1)
    {
        return $this->cache('increment')->increment($key, $value);
    }

    public function decrement($key, $value = 1)
    {
        return $this->cache('decrement')->decrement($key, $value);
    }

    public function forever($key, $value)
    {
        return $this->cache('forever')->forever($key, $value);
    }

    public function forget($key)
    {
        return $this->cache('forget')->forget($key);
    }

    public function flush()
    {
        return $this->cache('flush')->flush();
    }

    private function cache(string $method): Store
    {
        if ($this->cache === null) {
            throw new \BadMethodCallException("distlock is a lock store only: $method() needs a cache store "
                . "for values; name one as this store's 'cache' in config/cache.php "
                . "(e.g. 'cache' => 'redis'), or use Cache::store(NAME) for values");
        }

        return $this->cache;
    }
}
