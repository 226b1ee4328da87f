--TEST--
distlock OO: read locks and writers interoperate with Debian's symfony/lock RedisStore (5.4, phpredis) on one key, both ways; a waiting writer's intent stops new readers of both; a set of keys is a writer to symfony
--EXTENSIONS--
distlock
redis
pcntl
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
require '/usr/share/php/Symfony/Component/Lock/autoload.php';   // Debian's php-symfony-lock
use Distlock\Client;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\RedisStore;

$uri = dl_test_uri();
$r = dl_test_phpredis();
$factory = new LockFactory(new RedisStore(dl_test_phpredis()));
$c = new Client($uri);

// Readers of both share the key: one sorted set with both tokens.
$k = dl_test_key('sf-readers');
$sr = $factory->createLock($k, 30);
var_dump($sr->acquireRead());
$ours = $c->tryLock($k, 30, Client::SHARED);
var_dump($ours instanceof Distlock\Lock, $r->zCard($k));
$sr2 = $factory->createLock($k, 30);
var_dump($sr2->acquireRead(), $r->zCard($k));
// ... and exclude the writers of both.
$sw = $factory->createLock($k, 30);
var_dump($sw->acquire(), $c->tryLock($k, 30));
// symfony's release of a reader leaves ours held: still a member, extend() works.
$sr->release();
$sr2->release();
var_dump($r->zScore($k, $ours->token()) !== false, $ours->extend(20) > 19.0, $ours->isHeld());
// ... and ours leaves symfony's held.
$sr3 = $factory->createLock($k, 30);
var_dump($sr3->acquireRead(), $ours->release(), $sr3->isAcquired(), $r->zCard($k));
$sr3->release();

// A symfony writer (its token and __write__) excludes our readers and writers.
$k = dl_test_key('sf-writer');
$sw = $factory->createLock($k, 30);
var_dump($sw->acquire());
var_dump($c->tryLock($k, 30, Client::SHARED), $c->tryLock($k, 30));
$sw->release();
$ours = $c->tryLock($k, 30, Client::SHARED);
var_dump($ours instanceof Distlock\Lock, $ours->release());

// Our writer (today's string key) excludes symfony's readers and writers: its
// scripts answer "conflicted" on a string key.
$k = dl_test_key('sf-our-writer');
$w = $c->tryLock($k, 30);
$sl = $factory->createLock($k, 30);
var_dump($sl->acquireRead(), $sl->acquire(), $r->get($k) === $w->token());
var_dump($w->release(), $sl->acquireRead());
$sl->release();

// Our writer waiting on a reader marks its intent (__write__): new readers,
// symfony's and ours, are refused while it waits; it gets the key when the
// reader it waits for releases.
$k = dl_test_key('sf-intent');
$state = dl_test_key('sf-intent-state');
$ours = $c->tryLock($k, 30, Client::SHARED);
$pid = pcntl_fork();
if ($pid === 0) {
    $rr = dl_test_phpredis();
    $w = (new Client($uri))->lock($k, 30, 20.0);
    $rr->set($state, 'written:' . ($rr->get($k) === $w->token() ? 'string key' : 'not ours'));
    dl_test_wait_for(fn() => $rr->get($state) === 'seen', 10.0);
    exit($w->release() ? 0 : 1);
}
var_dump(dl_test_wait_for(fn() => $r->zScore($k, '__write__') !== false, 10.0));
$late = $factory->createLock($k, 30);
var_dump($late->acquireRead(), $c->tryLock($k, 30, Client::SHARED));
var_dump($ours->release());
var_dump(dl_test_wait_for(fn() => str_starts_with((string)$r->get($state), 'written'), 10.0), $r->get($state));
$r->set($state, 'seen');
pcntl_waitpid($pid, $status);
echo 'writer exit: ', pcntl_wexitstatus($status), "\n";
var_dump($late->acquireRead());
$late->release();
// A set of keys takes each key as a writer: a symfony reader on one of them
// holds the set off (nothing of it is written), and the set's keys make
// symfony's readers conflict.
$ks = [dl_test_key('sf-set-a'), dl_test_key('sf-set-b')];
$sr = $factory->createLock($ks[1], 30);
var_dump($sr->acquireRead(), $c->tryLockMany($ks, 30), $r->exists($ks[0]));
$sr->release();
$set = $c->tryLockMany($ks, 30);
$sr = $factory->createLock($ks[0], 30);
var_dump($set instanceof Distlock\Lock, $sr->acquireRead(), $set->release(), $sr->acquireRead());
$sr->release();
?>
--EXPECT--
bool(true)
bool(true)
int(2)
bool(true)
int(3)
bool(false)
NULL
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
int(1)
bool(true)
NULL
NULL
bool(true)
bool(true)
bool(false)
bool(false)
bool(true)
bool(true)
bool(true)
bool(true)
bool(false)
NULL
bool(true)
bool(true)
string(18) "written:string key"
writer exit: 0
bool(true)
bool(true)
NULL
int(0)
bool(true)
bool(false)
bool(true)
bool(true)
