--TEST--
distlock compat: the seed's ERP snippets (分仓 / 审单) run unchanged on Process_RequestCounter delegating to the extension
--EXTENSIONS--
distlock
redis
--SKIPIF--
<?php if (!getenv('DISTLOCK_TEST_REDIS')) die('skip DISTLOCK_TEST_REDIS not set (run php-ext/tests/run.sh)'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/common.inc';
require __DIR__ . '/fixtures/erp_counter.php';
ini_set('distlock.servers', dl_test_uri());

class Service_OrderForWarehouseProcessNew
{
    public static function getOrderListLockKey($sn, $type)
    {
        return dl_test_key("order-list:$type:$sn");
    }

    // 审单 (audit): the seed's snippet, verbatim, inside a method.
    public static function audit($refNo, $prcObj, $redisObj)
    {
        $orderListLock = array();
        // 加锁，防止多次操作审单以及分仓同步进行
        if ($redisObj) {
            try {
                $orderListLockKey = self::getOrderListLockKey($refNo, 'audit');
                $orderListLock[$orderListLockKey] = $prcObj->distributedLock($orderListLockKey,500);
            } catch (Exception $e) {
                throw new Exception($refNo . ': ' . $e->getMessage(), 51898);
            }
        }
        return $orderListLock;
    }
}

// 分仓 (warehouse split): the seed's snippet, verbatim, in its loop over orders.
function split_warehouse(array $orders, $prcObj, $redisObj)
{
    $failArr = array();
    $done = array();
    foreach ($orders as $order) {
        $order_sn = $order['order_sn'];
        $orderListLock = array();
        // 加锁，防止多次操作审单以及分仓同步进行
        if ($redisObj) {
            try {
                $orderListLockKey = Service_OrderForWarehouseProcessNew::getOrderListLockKey($order_sn, 'audit');
                $orderListLock[$orderListLockKey] = $prcObj->distributedLock($orderListLockKey,300);
            } catch (Exception $e) {
                //失败
                $failArr[] = array(
                    'ask' => 0,
                    'message' => $order_sn . ': ' . $e->getMessage(),
                    'order_id' => $order['order_id'],
                    'ref_id' => $order['refrence_no_platform']
                );
                continue;
            }
        }

        // 业务逻辑.....
        $done[] = $order_sn;

        // 释放队列锁
        try {
            if ($orderListLock) {
                foreach ($orderListLock as $key => $val) {
                    $prcObj->distributedUnlock($key, $val);
                }
                unset($orderListLock);
            }
        } catch (Exception $e) {
        }
    }
    return [$done, $failArr];
}

$prcObj = new Process_RequestCounter();
$redisObj = true;
$r = dl_test_phpredis();

// SO-2 is being audited (lock held for 500 s) while the split runs over SO-1..SO-3.
$auditLocks = Service_OrderForWarehouseProcessNew::audit('SO-2', $prcObj, $redisObj);
$orders = [
    ['order_sn' => 'SO-1', 'order_id' => 1, 'refrence_no_platform' => 'P-1'],
    ['order_sn' => 'SO-2', 'order_id' => 2, 'refrence_no_platform' => 'P-2'],
    ['order_sn' => 'SO-3', 'order_id' => 3, 'refrence_no_platform' => 'P-3'],
];
[$done, $failArr] = split_warehouse($orders, $prcObj, $redisObj);
echo 'split done: ', implode(',', $done), "\n";
print_r($failArr);

// The split released its own locks: SO-1 and SO-3 can be audited now; SO-2 cannot be twice.
foreach (['SO-1', 'SO-3', 'SO-2'] as $sn) {
    try {
        $l = Service_OrderForWarehouseProcessNew::audit($sn, $prcObj, $redisObj);
        echo "audit $sn locked\n";
        foreach ($l as $key => $val) {
            var_dump($prcObj->distributedUnlock($key, $val));
        }
    } catch (Exception $e) {
        echo 'audit failed: ', $e->getCode(), ' ', $e->getMessage(), "\n";
    }
}

// The audit of SO-2 ends: unlock, and the split goes through.
foreach ($auditLocks as $key => $val) {
    var_dump($prcObj->distributedUnlock($key, $val));
}
[$done, $failArr] = split_warehouse($orders, $prcObj, $redisObj);
echo 'split done: ', implode(',', $done), ' failures: ', count($failArr), "\n";
var_dump(count($r->keys(dl_test_key('order-list:*'))));
?>
--EXPECT--
split done: SO-1,SO-3
Array
(
    [0] => Array
        (
            [ask] => 0
            [message] => SO-2: 请求过于频繁,相同业务单号300秒内仅允许请求1次!
            [order_id] => 2
            [ref_id] => P-2
        )

)
audit SO-1 locked
bool(true)
audit SO-3 locked
bool(true)
audit failed: 51898 SO-2: 请求过于频繁,相同业务单号500秒内仅允许请求1次!
bool(true)
split done: SO-1,SO-2,SO-3 failures: 0
int(0)
