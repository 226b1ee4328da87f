<?php
/*
 * The adapters' autoloader for users without Composer (Debian's php-distlock
 * installs it as /usr/share/php/Distlock/autoload.php, beside Symfony/ and
 * Laravel/): PSR-4 for Distlock\Symfony\ and Distlock\Laravel\.
 *
 * The frameworks' own classes come from the user's autoloader when there is
 * one (Composer's vendor/autoload.php, loaded first); only when a framework's
 * interfaces are not loadable yet are Debian's autoloaders for it required
 * (php-symfony-lock, php-illuminate-cache), so a Composer-installed Symfony
 * or Laravel is never shadowed by the system's copy.
 */

declare(strict_types=1);

(static function (): void {
    // From a source tree or Composer package the classes are in src/;
    // installed by the Debian package they sit beside this file.
    $base = is_dir(__DIR__ . '/src') ? __DIR__ . '/src' : __DIR__;
    spl_autoload_register(static function (string $class) use ($base): void {
        foreach (['Distlock\\Symfony\\' => '/Symfony/', 'Distlock\\Laravel\\' => '/Laravel/'] as $prefix => $dir) {
            if (strncmp($class, $prefix, strlen($prefix)) === 0) {
                $file = $base . $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
                if (is_file($file)) {
                    require $file;
                }
                return;
            }
        }
    });

    // Debian's framework autoloaders, each only when the user's autoloader
    // does not know the framework (class_exists() asks it, autoloading).
    $system = [
        \Symfony\Component\Lock\PersistingStoreInterface::class => 'Symfony/Component/Lock/autoload.php',
        \Illuminate\Contracts\Cache\LockProvider::class => 'Illuminate/Cache/autoload.php',
    ];
    foreach ($system as $probe => $loader) {
        if (!interface_exists($probe)) {
            $path = stream_resolve_include_path($loader);
            if ($path !== false) {
                require_once $path;
            }
        }
    }
})();
