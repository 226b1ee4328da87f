<?php
// distlock OO API (Distlock\Client / Distlock\Lock) reduced to driver.php's
// try / wait / release closures. TTLs arrive in ms; the OO API takes seconds.
function distlock_oo_impl(string $uris): array
{
    $client = new Distlock\Client($uris);
    return [
        'try' => function ($key, $ttl) use ($client) { return $client->tryLock($key, $ttl / 1000.0); },
        'wait' => function ($key, $ttl) use ($client) { return $client->lock($key, $ttl / 1000.0, 10.0); },
        'release' => function ($l) { return $l->release(); },
    ];
}
