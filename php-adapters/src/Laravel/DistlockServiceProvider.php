<?php
/*
 * Registers the cache driver 'distlock' (config/cache.php), so a store
 *
 *   'locks' => ['driver' => 'distlock', 'servers' => 'redis://127.0.0.1:6379'],
 *
 * serves Cache::store('locks')->lock(...), or Cache::lock(...) when it is the
 * default store. Its entry's keys:
 *   servers  the server list (one URI, or a comma list for Redlock); absent:
 *            the INI setting distlock.servers
 *   options  Distlock\Client options (name => value); absent: the INI's
 *   prefix   the keys' prefix; absent: the cache prefix (config 'cache.prefix')
 *   cache    the name of another store that keeps values (Cache::get/put...);
 *            absent: those throw, distlock keeps locks only
 *   lease    seconds of the auto-renewed lease of a lock without expiry (60)
 */

declare(strict_types=1);

namespace Distlock\Laravel;

use Distlock\Client;
use Illuminate\Support\ServiceProvider;

class DistlockServiceProvider extends ServiceProvider
{
    public function register()
    {
        // In a booting callback, as Laravel's docs register a cache driver:
        // other providers' boot() may already ask for the cache.
        $this->app->booting(function ($app) {
            $app['cache']->extend('distlock', function ($app, array $config) {
                // Bound to the CacheManager by extend(): $this is the manager.
                $cache = null;
                if (isset($config['cache'])) {
                    $other = $this->getConfig($config['cache']);
                    if (($other['driver'] ?? null) === 'distlock') {
                        throw new \InvalidArgumentException("the 'cache' of a distlock store must name a store "
                            . "of another driver (it keeps the values), not '{$config['cache']}'");
                    }
                    $cache = $this->store($config['cache'])->getStore();
                }

                return $this->repository(new DistlockStore(
                    new Client($config['servers'] ?? null, $config['options'] ?? []),
                    (string) $this->getPrefix($config),
                    $cache,
                    (float) ($config['lease'] ?? 60.0),
                ));
            });
        });
    }
}
