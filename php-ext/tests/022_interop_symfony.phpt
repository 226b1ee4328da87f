--TEST--
distlock compat: Debian's symfony/lock (RedisStore over phpredis) and the extension exclude each other on the same key
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
require '/usr/share/php/Symfony/Component/Lock/autoload.php';   // Debian's php-symfony-lock
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\RedisStore;

ini_set('distlock.servers', dl_test_uri());
$r = dl_test_phpredis();
$factory = new LockFactory(new RedisStore(dl_test_phpredis()));
$client = new Distlock\Client();

// symfony/lock holds it (5.4 stores a sorted set): we do not get it, through either API.
$k = dl_test_key('symfony-first');
$sl = $factory->createLock($k, 30);
var_dump($sl->acquire());
try {
    distributedLock($k, 30);
    echo "extension got it\n";
} catch (Exception $e) {
    // Our writer reads symfony's sorted set (its token and __write__: a
    // writer) as held by another owner: the seed's \Exception 500002, as for
    // any held key (docs/shared-locks.md).
    echo get_class($e), ' ', $e->getCode(), "\n";
}
echo $client->tryLock($k, 30) === null ? "excluded\n" : "extension got it\n";
var_dump($r->type($k) === Redis::REDIS_ZSET, $sl->isAcquired());
$sl->release();
var_dump($r->exists($k));

// We hold it: symfony/lock does not get it, and its release leaves our key alone.
$k = dl_test_key('extension-first');
$t = distributedLock($k, 30);
$sl = $factory->createLock($k, 30);
var_dump($sl->acquire());
$sl->release();
var_dump($r->get($k) === $t);
var_dump(distributedUnlock($k, $t));
$sl = $factory->createLock($k, 30);
var_dump($sl->acquire());           // free again
$sl->release();
?>
--EXPECT--
bool(true)
Exception 500002
excluded
bool(true)
bool(true)
int(0)
bool(false)
bool(true)
bool(true)
bool(true)
