/* protocol.c -- the lock protocol on one node. The Lua scripts
 * (one table, handed to the transport, which keeps them loaded), the names
 * kept beside a lock key, the ordering tag of an ownership, and what a
 * node's reply means.
 *
 * The value of a lock key is the owner's token as a plain string, so the
 * seed PHP code, redis-py, node-redlock, redsync and symfony/lock exclude us
 * and we exclude them on the same key.
 *
 * Layer: 2 protocol */
#include <stdio.h>
#include <string.h>

#include "protocol.h"

/* The scripts that wake waiters, by publish call (PUB: the start of a call
 * taking channel and message): PUBLISH on plain and Sentinel nodes (what
 * waiters of every version subscribe to), SPUBLISH in the key's slot on a
 * Redis Cluster node (the _sh variants, chosen by the transport per node:
 * distlock__call.cl_script). SPUBLISH is Redis 7.0+: a 5.0/6.x cluster
 * refuses it as an unknown command, and gets PUBLISH, which a cluster
 * broadcasts to every node (wait.c SUBSCRIBEs there). */
#define PUB_CLASSIC "redis.pcall('PUBLISH', "
#define PUB_SHARD "publish_shard("
#define PUBLISH_SHARD_FN \
        "local function publish_shard(ch, msg)\n" \
        "  local r = redis.pcall('SPUBLISH', ch, msg)\n" \
        "  if type(r) == 'table' and r.err then redis.pcall('PUBLISH', ch, msg) end\n" \
        "end\n"
/* Zset leases (read locks and semaphore permits, docs/shared-locks.md and
 * docs/semaphores.md): a sorted set at the key, members = tokens scored by
 * their expiry in ms since the epoch (the server's TIME), the key's
 * PEXPIREAT = the highest score. `__write__`: a writer holds the key
 * (symfony/lock: with its token at the same score) or waits for the
 * readers (ours: alone, an intent); `__distlock_semaphore__`, scored P,
 * marks a semaphore of P permits. Member names starting with "__" are
 * never a token (tokens are hex). */
#define ZSET_NOW_FN \
        "local function zset_now()\n" \
        "  local t = redis.call('TIME')\n" \
        "  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
        "end\n"
/* Another library's sorted set under the key (a leaderboard, a fair
 * queue: scores that are no expiry in ms since the epoch) is a key of
 * another type, as a list or a hash is (guarantees.md): refused, never
 * swept as expired leases. Every member of ours (tokens, `__write__`) is
 * scored above 10^12; the semaphore's marker is checked before this. */
#define ZSET_FOREIGN_CHECK \
        "  if redis.call('ZCOUNT', k, '-inf', 1000000000000) > 0 then\n" \
        "    return redis.error_reply(\"'\" .. k .. \"' holds a sorted set of another kind, " \
        "not a lock\")\n" \
        "  end\n"
/* zset_extend(k, token, ttl): nil if k is not a zset (the caller keeps its
 * WRONGTYPE), 0 if token is no live member, else 1: rescored now + ttl; a
 * command the node refuses (an ACL without ZADD) is that key's answer, an
 * error element: pcall, so it does not abort the renewal of the other keys
 * of the batch (S_EXTEND, S_EXTEND_MULTI). */
#define ZSET_EXTEND_FN ZSET_NOW_FN \
        "local function zset_extend(k, tok, ttl)\n" \
        "  local ty = redis.pcall('TYPE', k)\n" \
        "  if ty.err then return ty end\n" \
        "  if ty.ok ~= 'zset' then return nil end\n" \
        "  if string.sub(tok, 1, 2) == '__' then return 0 end\n" \
        "  local now = zset_now()\n" \
        "  local s = redis.pcall('ZSCORE', k, tok)\n" \
        "  if type(s) == 'table' then return s end\n" \
        "  if not s or tonumber(s) <= now then return 0 end\n" \
        "  local r = redis.pcall('ZADD', k, now + tonumber(ttl), tok)\n" \
        "  if type(r) == 'table' then return r end\n" \
        "  r = redis.pcall('ZRANGE', k, -1, -1, 'WITHSCORES')\n" \
        "  if r.err then return r end\n" \
        "  r = redis.pcall('PEXPIREAT', k, r[2])\n" \
        "  if type(r) == 'table' then return r end\n" \
        "  return 1\n" \
        "end\n"

#define BODY_RELEASE(PUB) \
        /* KEYS: key [owner]; ARGV: token channel. Compare-and-delete, then \
         * wake waiters. pcall: a user without channel rights still releases. \
         * An empty channel wakes no one: a lost attempt's undo of grants \
         * that never made a lock (acquire.c undo). */ \
        "local v = redis.pcall('GET', KEYS[1])\n" \
        "if type(v) == 'table' and v.err then\n" \
        /* a zset lease (read lock, permit: ZSET_LEASE_NOTE): its member */ \
        "  if string.sub(v.err, 1, 9) ~= 'WRONGTYPE' or " \
        "redis.call('TYPE', KEYS[1]).ok ~= 'zset' then return v end\n" \
        "  local s = redis.call('ZSCORE', KEYS[1], ARGV[1])\n" \
        "  if not s or string.sub(ARGV[1], 1, 2) == '__' then return 0 end\n" \
        "  redis.call('ZREM', KEYS[1], ARGV[1])\n" \
        "  local left = redis.call('ZCARD', KEYS[1])\n" \
        "  if left == 0 or (left == 1 and redis.call('ZSCORE', KEYS[1], '__distlock_semaphore__')) " \
        "then redis.call('DEL', KEYS[1]) end\n" \
        "  if ARGV[2] ~= '' then " PUB "ARGV[2], '') end\n" \
        "  local t = redis.call('TIME')\n" \
        /* expired (not swept yet): gone, as an expired lock key is */ \
        "  if tonumber(s) <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) " \
        "then return 0 end\n" \
        "  return 1\n" \
        "end\n" \
        "if v == ARGV[1] then\n" \
        "  redis.call('DEL', KEYS[1])\n" \
        "  if KEYS[2] then redis.call('DEL', KEYS[2]) end\n" \
        "  if ARGV[2] ~= '' then " PUB "ARGV[2], '') end\n" \
        "  return 1\n" \
        "end\n" \
        "return 0\n"

#define BODY_FAIR(PUB) \
        /* KEYS: key queue qdeadlines [fence] [owner]; ARGV: token ttl_ms \
         * strict queue_ttl_ms channel [host pid program since label] (owner \
         * metadata: its key is the last one). Waiters are served in arrival order: the \
         * free lock goes to the queue's head; others join the queue (or \
         * refresh their entry, which expires if the waiter dies) and learn \
         * their rank (0: next), and, if the lock is free, who is first. \
         * When the head takes the lock, the new head \
         * is told by name, so a release needs to wake only it. queue_ttl 0: \
         * try only. */ \
        "if redis.call('TYPE', KEYS[1]).ok == 'zset' then\n" \
        "  return redis.error_reply(\"'\" .. KEYS[1] .. \"' holds read locks or a semaphore: " \
        "a fair (DISTLOCK_FAIR) acquire does not wait for them\")\n" \
        "end\n" \
        "local fk = KEYS[4]\n" \
        "if ARGV[10] and #KEYS < 5 then fk = nil end\n" \
        "if fk then\n" \
        "  local f = redis.call('GET', fk)\n" \
        "  if f and not tonumber(f) then\n" \
        "    return redis.error_reply('fence counter ' .. fk .. ' is not an integer')\n" \
        "  end\n" \
        "end\n" \
        "local t = redis.call('TIME')\n" \
        "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
        "while true do\n" \
        "  local head = redis.call('ZRANGE', KEYS[2], 0, 0)\n" \
        "  if #head == 0 then break end\n" \
        "  if tonumber(redis.call('HGET', KEYS[3], head[1]) or '0') >= now then break end\n" \
        "  redis.call('ZREM', KEYS[2], head[1])\n" \
        "  redis.call('HDEL', KEYS[3], head[1])\n" \
        "end\n" \
        "local v = redis.call('GET', KEYS[1])\n" \
        "local mine = (v == ARGV[1] and ARGV[3] == '0')\n" \
        "local first = ''\n" \
        "if v == false then\n" \
        "  local head = redis.call('ZRANGE', KEYS[2], 0, 0)\n" \
        "  mine = (#head == 0 or head[1] == ARGV[1])\n" \
        "  if #head > 0 then first = head[1] end\n" \
        "end\n" \
        "if mine then\n" \
        "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n" \
        "  if ARGV[10] then\n" \
        "    local o = KEYS[#KEYS]\n" \
        "    redis.call('DEL', o)\n" \
        "    redis.call('HSET', o, 'token', ARGV[1], 'host', ARGV[6], 'pid', ARGV[7]," \
        " 'program', ARGV[8], 'since', ARGV[9], 'label', ARGV[10])\n" \
        "    redis.call('PEXPIRE', o, ARGV[2])\n" \
        "  end\n" \
        "  redis.call('ZREM', KEYS[2], ARGV[1])\n" \
        "  redis.call('HDEL', KEYS[3], ARGV[1])\n" \
        "  local nxt = redis.call('ZRANGE', KEYS[2], 0, 0)\n" \
        "  if #nxt > 0 then " PUB "ARGV[5], nxt[1]) end\n" \
        "  if fk then\n" \
        "    if v == false then return {1, redis.call('INCR', fk)} end\n" \
        "    return {1, tonumber(redis.call('GET', fk) or '0')}\n" \
        "  end\n" \
        "  return {1, -1}\n" \
        "end\n" \
        "local qttl = tonumber(ARGV[4])\n" \
        "if qttl > 0 then\n" \
        "  if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then\n" \
        "    local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')\n" \
        "    local seq = 0\n" \
        "    if #last > 0 then seq = tonumber(last[2]) + 1 end\n" \
        "    redis.call('ZADD', KEYS[2], seq, ARGV[1])\n" \
        "  end\n" \
        "  redis.call('HSET', KEYS[3], ARGV[1], now + qttl)\n" \
        "  redis.call('PEXPIRE', KEYS[2], qttl)\n" \
        "  redis.call('PEXPIRE', KEYS[3], qttl)\n" \
        "end\n" \
        "local rank = redis.call('ZRANK', KEYS[2], ARGV[1]) or -1\n" \
        "if v == false then return {2, 0, rank, first} end\n"  /* free, but `first` is ahead */ \
        "return {0, redis.call('PTTL', KEYS[1]), rank}\n"

#define BODY_LEAVE(PUB) \
        /* KEYS: queue qdeadlines key; ARGV: token channel. A waiter gives \
         * up: leave the queue and, if the lock is free, wake the next. */ \
        "redis.call('ZREM', KEYS[1], ARGV[1])\n" \
        "redis.call('HDEL', KEYS[2], ARGV[1])\n" \
        "if redis.call('EXISTS', KEYS[3]) == 0 and redis.call('EXISTS', KEYS[1]) == 1 then\n" \
        "  " PUB "ARGV[2], '')\n" \
        "end\n" \
        "return 1\n"

#define BODY_FAIR_UNDO(PUB) \
        /* KEYS: key queue qdeadlines [owner]; ARGV: token channel \
         * queue_ttl_ms. A \
         * fair acquire that won this node but not a quorum gives the node \
         * back and keeps its place: it is put back at the front of the \
         * queue (winning had taken it out), so the nodes' queues do not \
         * drift apart and arrival order holds. An empty channel wakes no \
         * one (a lost attempt's grants never made a lock: acquire.c undo). */ \
        "if redis.call('GET', KEYS[1]) == ARGV[1] then\n" \
        "  redis.call('DEL', KEYS[1])\n" \
        "  if KEYS[4] then redis.call('DEL', KEYS[4]) end\n" \
        "  if ARGV[2] ~= '' then " PUB "ARGV[2], '') end\n" \
        "end\n" \
        "if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then\n" \
        "  local t = redis.call('TIME')\n" \
        "  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
        "  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')\n" \
        "  local seq = 0\n" \
        "  if #first > 0 then seq = tonumber(first[2]) - 1 end\n" \
        "  redis.call('ZADD', KEYS[2], seq, ARGV[1])\n" \
        "  redis.call('HSET', KEYS[3], ARGV[1], now + tonumber(ARGV[3]))\n" \
        "  redis.call('PEXPIRE', KEYS[2], ARGV[3])\n" \
        "  redis.call('PEXPIRE', KEYS[3], ARGV[3])\n" \
        "end\n" \
        "return 1\n"

#define BODY_WRITE_LEAVE(PUB) \
        /* KEYS: key [writers]; ARGV: channel [writer]. A writer that \
         * waited for readers gives up, or won: it leaves the registry of \
         * waiting writers; its intent (`__write__` alone at its score; a \
         * symfony writer's has its token beside it) goes only when no \
         * other writer is still waiting (writers kept beside the key: a \
         * cluster key whose side keys are not in its slot has none, and \
         * the first writer to leave withdraws the intent), and the readers \
         * it kept out are woken. pcall on the registry: a key of another \
         * type under its name leaves the intent to the old rule. */ \
        ZSET_NOW_FN \
        "local k, wk = KEYS[1], KEYS[2]\n" \
        "if wk then redis.pcall('ZREM', wk, ARGV[2]) end\n" \
        "if redis.call('TYPE', k).ok ~= 'zset' then return 0 end\n" \
        "local w = redis.call('ZSCORE', k, '__write__')\n" \
        "if not w or redis.call('ZCOUNT', k, w, w) > 1 then return 0 end\n" \
        "if wk then\n" \
        "  redis.pcall('ZREMRANGEBYSCORE', wk, '-inf', zset_now())\n" \
        "  local n = redis.pcall('ZCARD', wk)\n" \
        "  if type(n) == 'number' and n > 0 then return 0 end\n" \
        "end\n" \
        "redis.call('ZREM', k, '__write__')\n" \
        "if redis.call('ZCARD', k) == 0 then redis.call('DEL', k) end\n" \
        PUB "ARGV[1], '')\n" \
        "return 1\n"
/* A set's release or extend: a node that refuses reading a key (an ACL
 * without GET, a key not served here) said nothing about who holds it, so
 * the refusal is the answer, before anything is written (errors.md: a
 * refusal is an error, never a loss); a key of another type is not ours. */
#define MANY_REFUSED_FIRST \
        "for i = 1, #KEYS do\n" \
        "  local v = redis.pcall('GET', KEYS[i])\n" \
        "  if type(v) == 'table' and v.err and string.sub(v.err, 1, 9) ~= 'WRONGTYPE' then " \
        "return v end\n" \
        "end\n"
#define BODY_RELEASE_MANY(PUB) \
        /* KEYS: k1..km; ARGV: token ch1..chm. Compare-and-delete of every \
         * key of a set, each waking its own waiters (an empty channel: \
         * none, keyset.c). Answers per key, {r1.. \
         * rm}: 1 deleted (it held our token), 0 not ours: the caller needs \
         * each key's quorum, and one node may have lost one key while it \
         * still holds another (keyset.c). */ \
        MANY_REFUSED_FIRST \
        "local r = {}\n" \
        "for i = 1, #KEYS do\n" \
        "  if redis.pcall('GET', KEYS[i]) == ARGV[1] then\n" \
        "    redis.call('DEL', KEYS[i])\n" \
        "    if ARGV[i + 1] ~= '' then " PUB "ARGV[i + 1], '') end\n" \
        "    r[i] = 1\n" \
        "  else\n" \
        "    r[i] = 0\n" \
        "  end\n" \
        "end\n" \
        "return r\n"

/* Every script is atomic on its node. KEYS[1] is always the lock key. */
const distlock__script distlock__scripts[DISTLOCK__S_COUNT] = {
    [DISTLOCK__S_ACQUIRE] = { "acquire",
        /* KEYS: key [fence] [owner]; ARGV: token ttl_ms strict [host pid
         * program since label] (owner metadata: its key is the last one).
         * Our own token already there (a retry after a lost reply) refreshes
         * the TTL and succeeds, saying so ({1, fence, 1}: the key held our
         * token before this request, which created nothing), unless strict
         * (plain SET NX semantics): then the reply says the holder is us
         * ({0, pttl, 1}). A fence counter that is not an integer is refused
         * before anything is written. The lock key's SET is the last call:
         * a refusal (an ACL without HSET or INCR, OOM) comes before it, so a
         * refused acquire never wrote the lock key (acquire.c's undo). */
        ZSET_NOW_FN
        /* The writer of read locks (a zset at the key): held while a live
         * member other than `__write__` is there; a waiting acquire (the
         * intent ms > 0 after the owner fields) marks its intent with
         * `__write__` (alone at its score, refreshed), so readers arriving
         * now are refused and the writer is not starved. With the registry
         * of waiting writers (the last key; the last ARGV: the writer's
         * name for its whole wait, after the intent) it also notes itself
         * there, until its intent's end, so another writer's leave keeps
         * `__write__` while it waits (S_WRITE_LEAVE). Only an intent or
         * nothing live left: the zset goes, the writer leaves the
         * registry, the lock is taken below as on a free key. The reply
         * says 'r' (readers). */
        "local intent, wid, wk, nk = 0, nil, nil, #KEYS\n"
        "if #ARGV == 5 or #ARGV == 10 then\n"
        "  intent, wid, wk, nk = tonumber(ARGV[#ARGV - 1]), ARGV[#ARGV], KEYS[#KEYS], #KEYS - 1\n"
        "elseif #ARGV == 4 or #ARGV == 9 then\n"
        "  intent = tonumber(ARGV[#ARGV])\n"
        "end\n"
        "if redis.call('TYPE', KEYS[1]).ok == 'zset' then\n"
        "  local k = KEYS[1]\n"
        "  if redis.call('ZSCORE', k, '__distlock_semaphore__') then\n"
        "    return redis.error_reply(\"'\" .. k .. \"' is a semaphore, not a lock\")\n"
        "  end\n"
        ZSET_FOREIGN_CHECK
        "  local now = zset_now()\n"
        "  redis.call('ZREMRANGEBYSCORE', k, '-inf', now)\n"
        "  local w = redis.call('ZSCORE', k, '__write__')\n"
        "  local live = redis.call('ZCARD', k)\n"
        "  if w then live = live - 1 end\n"
        "  if live > 0 then\n"
        "    if intent > 0 and wk then\n"
        /* pcall: a key of another type under the registry's name leaves
         * the intent to the old rule (the first leave withdraws it) */
        "      redis.pcall('ZREMRANGEBYSCORE', wk, '-inf', now)\n"
        "      if type(redis.pcall('ZADD', wk, now + intent, wid)) == 'number' then\n"
        "        redis.call('PEXPIREAT', wk, redis.call('ZRANGE', wk, -1, -1, 'WITHSCORES')[2])\n"
        "      end\n"
        "    end\n"
        "    if intent > 0 and (not w or (redis.call('ZCOUNT', k, w, w) == 1 and"
        " tonumber(w) < now + intent)) then\n"
        "      redis.call('ZADD', k, now + intent, '__write__')\n"
        "    end\n"
        "    local top = redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')[2]\n"
        "    redis.call('PEXPIREAT', k, top)\n"
        "    return {0, tonumber(top) - now, 0, 'r'}\n"
        "  end\n"
        "  if wk then redis.pcall('ZREM', wk, wid) end\n"
        "  redis.call('DEL', k)\n"
        "end\n"
        "local f, fk = false, nil\n"
        "if nk >= 2 and not (ARGV[8] and nk < 3) then fk = KEYS[2] end\n"
        "if fk then\n"
        "  f = redis.call('GET', fk)\n"
        "  if f and not tonumber(f) then\n"
        "    return redis.error_reply('fence counter ' .. fk .. ' is not an integer')\n"
        "  end\n"
        "end\n"
        "local v = redis.call('GET', KEYS[1])\n"
        "if v == false or (v == ARGV[1] and ARGV[3] == '0') then\n"
        "  if ARGV[8] then\n"
        "    local o = KEYS[nk]\n"
        "    redis.call('DEL', o)\n"
        "    redis.call('HSET', o, 'token', ARGV[1], 'host', ARGV[4], 'pid', ARGV[5],"
        " 'program', ARGV[6], 'since', ARGV[7], 'label', ARGV[8])\n"
        "    redis.call('PEXPIRE', o, ARGV[2])\n"
        "  end\n"
        "  local fv = -1\n"
        "  if fk then\n"
        "    if v == false then fv = redis.call('INCR', fk) else fv = tonumber(f or '0') end\n"
        "  end\n"
        "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
        "  return {1, fv, v == false and 0 or 1}\n"
        "end\n"
        "return {0, redis.call('PTTL', KEYS[1]), v == ARGV[1] and 1 or 0}\n" },
    [DISTLOCK__S_RELEASE] = { "release", BODY_RELEASE(PUB_CLASSIC) },
    [DISTLOCK__S_EXTEND] = { "extend",
        /* KEYS: k1..km [o1..om]; ARGV: token1 ttl1 .. tokenm ttlm (o: the
         * owner metadata keys, renewed with their locks). Batched so the
         * watchdog renews every lock due on a node in one round trip. pcall:
         * one key's refusal (WRONGTYPE, an ACL without GET) must not abort
         * the renewal of the other keys of the batch; it is that key's
         * answer, an error element, so it reads as a refusal, never as
         * "not ours" (1 renewed, 0 not ours, error: refused). */
        ZSET_EXTEND_FN
        "local r, m = {}, #ARGV / 2\n"
        "for i = 1, m do\n"
        "  local v = redis.pcall('GET', KEYS[i])\n"
        "  if type(v) == 'table' and v.err then\n"
        "    r[i] = string.sub(v.err, 1, 9) == 'WRONGTYPE' and"
        " zset_extend(KEYS[i], ARGV[2*i-1], ARGV[2*i]) or v\n"
        "  elseif v == ARGV[2*i-1] then\n"
        "    redis.call('PEXPIRE', KEYS[i], ARGV[2*i])\n"
        "    if KEYS[m+i] then redis.pcall('PEXPIRE', KEYS[m+i], ARGV[2*i]) end\n"
        "    r[i] = 1\n"
        "  else\n"
        "    r[i] = 0\n"
        "  end\n"
        "end\n"
        "return r\n" },
    [DISTLOCK__S_RAISE] = { "raise",
        /* KEYS: key fence; ARGV: token F. Second fencing round for N > 1:
         * raise the counter to F only where we still own the lock. */
        "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
        "local cur = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
        "if cur < tonumber(ARGV[2]) then redis.call('SET', KEYS[2], ARGV[2]) end\n"
        "return 1\n" },
    [DISTLOCK__S_INSPECT] = { "inspect",
        /* KEYS: key [owner]: {value, pttl [, owner hash fields, owner pttl]};
         * a zset lease key (KEYS: key): {kind, pttl, holders, permits,
         * writer}, kind 2 read locks (holders: live tokens; writer 1: a
         * live `__write__`), 3 a semaphore (permits: its marker's score)
         * -- distlock_holder_kind */
        "if not KEYS[2] and redis.call('TYPE', KEYS[1]).ok == 'zset' then\n"
        "  local k = KEYS[1]\n"
        "  local t = redis.call('TIME')\n"
        "  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
        "  local p = redis.call('ZSCORE', k, '__distlock_semaphore__')\n"
        /* another library's sorted set (ZSET_FOREIGN_CHECK): a value of
         * another type, as admin.c reads a WRONGTYPE */
        "  if not p and redis.call('ZCOUNT', k, '-inf', 1000000000000) > 0 then\n"
        "    return redis.error_reply('WRONGTYPE a sorted set of another kind')\n"
        "  end\n"
        "  local live = redis.call('ZCOUNT', k, '(' .. math.max(now, 1000000), '+inf')\n"
        "  local w = redis.call('ZSCORE', k, '__write__')\n"
        "  local wl = 0\n"
        "  if w and tonumber(w) > now then live, wl = live - 1, 1 end\n"
        "  return {p and 3 or 2, redis.call('PTTL', k), live, tonumber(p or '0'), wl}\n"
        "end\n"
        "local r = {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}\n"
        "if KEYS[2] then\n"
        "  local o = redis.pcall('HGETALL', KEYS[2])\n"
        "  if type(o) ~= 'table' or o.err then o = {} end\n"
        "  r[3] = o\n"
        "  r[4] = redis.call('PTTL', KEYS[2])\n"
        "end\n"
        "return r\n" },
    [DISTLOCK__S_FAIR] = { "fair", BODY_FAIR(PUB_CLASSIC) },
    [DISTLOCK__S_LEAVE] = { "leave", BODY_LEAVE(PUB_CLASSIC) },
    [DISTLOCK__S_FAIR_UNDO] = { "fair_undo", BODY_FAIR_UNDO(PUB_CLASSIC) },
    [DISTLOCK__S_RELEASE_SH] = { "release_sh", PUBLISH_SHARD_FN BODY_RELEASE(PUB_SHARD) },
    [DISTLOCK__S_FAIR_SH] = { "fair_sh", PUBLISH_SHARD_FN BODY_FAIR(PUB_SHARD) },
    [DISTLOCK__S_LEAVE_SH] = { "leave_sh", PUBLISH_SHARD_FN BODY_LEAVE(PUB_SHARD) },
    [DISTLOCK__S_FAIR_UNDO_SH] = { "fair_undo_sh", PUBLISH_SHARD_FN BODY_FAIR_UNDO(PUB_SHARD) },
    [DISTLOCK__S_EXTEND_MULTI] = { "extend_multi",
        /* KEYS: k1 (routes the call; the first lock key, also in ARGV);
         * ARGV: ow, then per lock: key token ttl [owner] (ow 1: owner key
         * present). Extend for a Redis Cluster master: the keys are in
         * ARGV, so they may be of many slots (a script without a shebang
         * may touch undeclared keys of every slot its node serves; declared
         * keys of several slots would be CROSSSLOT). A key this node does
         * not serve now (slot moved; migrating and not here; importing)
         * fails its GET with "non local key": -1, and the caller renews it
         * by its own slot's route. Per key: 1 renewed, 0 not ours, -1 not
         * served here, a WRONGTYPE error element: refused (as S_EXTEND
         * answers it). pcall: no key aborts the others. */
        ZSET_EXTEND_FN
        "local ow = tonumber(ARGV[1])\n"
        "local s = 3 + ow\n"
        "local r = {}\n"
        "for i = 1, (#ARGV - 1) / s do\n"
        "  local b = 2 + (i - 1) * s\n"
        "  local v = redis.pcall('GET', ARGV[b])\n"
        "  if type(v) == 'table' and v.err and string.sub(v.err, 1, 9) == 'WRONGTYPE' then\n"
        "    r[i] = zset_extend(ARGV[b], ARGV[b+1], ARGV[b+2]) or v\n"
        "  elseif type(v) == 'table' and v.err then\n"
        "    r[i] = -1\n"
        "  elseif v == ARGV[b+1] then\n"
        "    redis.call('PEXPIRE', ARGV[b], ARGV[b+2])\n"
        "    if ow == 1 then redis.pcall('PEXPIRE', ARGV[b+3], ARGV[b+2]) end\n"
        "    r[i] = 1\n"
        "  else\n"
        "    r[i] = 0\n"
        "  end\n"
        "end\n"
        "return r\n" },
    /* zset leases */
    [DISTLOCK__S_ZACQUIRE] = { "zacquire", ZSET_NOW_FN
        /* KEYS: key; ARGV: token ttl_ms kind permits (kind 'r': a read
         * lock; 's': a permit of a semaphore of `permits`). Expired
         * members are swept first (a semaphore's from above its marker's
         * score). Replies as S_ACQUIRE: {1, -1, ours before} granted,
         * {0, pttl, 0} held (pttl: a lock's PTTL; for readers kept out by
         * a writer, the highest score's; for a full semaphore, when its
         * earliest permit ends); a key of the other kind: an error. */
        "local k, tok, now = KEYS[1], ARGV[1], zset_now()\n"
        "local ty = redis.call('TYPE', k).ok\n"
        "if ty == 'string' then\n"
        "  if ARGV[3] == 's' then\n"
        "    return redis.error_reply(\"'\" .. k .. \"' holds a lock, not a semaphore\")\n"
        "  end\n"
        "  return {0, redis.call('PTTL', k), 0}\n"
        "end\n"
        "if ty ~= 'zset' and ty ~= 'none' then\n"
        "  return redis.error_reply(\"'\" .. k .. \"' holds a \" .. ty .. \", not a lock\")\n"
        "end\n"
        "local sem = redis.call('ZSCORE', k, '__distlock_semaphore__')\n"
        "local mine\n"
        "if ARGV[3] == 'r' then\n"
        "  if sem then return redis.error_reply(\"'\" .. k .. \"' is a semaphore, not a lock\") end\n"
        ZSET_FOREIGN_CHECK
        "  redis.call('ZREMRANGEBYSCORE', k, '-inf', now)\n"
        "  mine = redis.call('ZSCORE', k, tok)\n"
        "  if not mine and redis.call('ZSCORE', k, '__write__') then\n"
        "    return {0, tonumber(redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')[2]) - now, 0}\n"
        "  end\n"
        "else\n"
        "  if not sem and redis.call('ZCARD', k) > 0 then\n"
        "    return redis.error_reply(\"'\" .. k .. \"' holds read locks, not a semaphore\")\n"
        "  end\n"
        "  redis.call('ZREMRANGEBYSCORE', k, '(1000000', now)\n"
        "  mine = redis.call('ZSCORE', k, tok)\n"
        "  local held = redis.call('ZCARD', k)\n"
        "  if sem then held = held - 1 end\n"
        "  if not mine and held >= tonumber(ARGV[4]) then\n"
        "    local e = redis.call('ZRANGEBYSCORE', k, '(1000000', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)\n"
        "    return {0, tonumber(e[2]) - now, 0}\n"
        "  end\n"
        "  redis.call('ZADD', k, ARGV[4], '__distlock_semaphore__')\n"
        "end\n"
        "redis.call('ZADD', k, now + tonumber(ARGV[2]), tok)\n"
        "redis.call('PEXPIREAT', k, redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')[2])\n"
        "return {1, -1, mine and 1 or 0}\n" },
    [DISTLOCK__S_WRITE_LEAVE] = { "write_leave", BODY_WRITE_LEAVE(PUB_CLASSIC) },
    [DISTLOCK__S_WRITE_LEAVE_SH] = { "write_leave_sh",
        PUBLISH_SHARD_FN BODY_WRITE_LEAVE(PUB_SHARD) },
    /* ---- several keys: each key is a plain lock (a string holding the
     * set's one token), so every other client sees today's locks. */
    [DISTLOCK__S_ACQUIRE_MANY] = { "acquire_many",
        /* KEYS: k1..km [f1..fm]; ARGV: token ttl_ms fencing (1: the fence
         * counters follow the keys). All or nothing on this node: every key
         * is checked before anything is written, so a key held by another
         * owner (or of another type) leaves the node as it was. Replies
         * {1, fence1..fencem} (-1 without fencing), or {0, pttl, i}: key i
         * (1-based) is held by another owner for pttl ms. Our own token on
         * a key (a resend whose first send ran: each attempt has a fresh
         * token) counts as free. Each key is taken as a writer: a key of
         * read locks (a sorted set of tokens scored by expiry, ms since the
         * epoch; symfony/lock's format) is held while a member other than
         * __write__ is live (pttl: until the last one expires), and once
         * none is, the sorted set gives way to the lock's string; a
         * semaphore's sorted set (its __distlock_semaphore__ member) is
         * refused, never taken. Expired members are removed first, as every
         * script on such a key does. */
        "local fencing = ARGV[3] == '1'\n"
        "local m = #KEYS\n"
        "if fencing then m = m / 2 end\n"
        "local fresh, zs, now = {}, {}, nil\n"
        "for i = 1, m do\n"
        "  local v = redis.pcall('GET', KEYS[i])\n"
        "  if type(v) == 'table' and v.err and string.sub(v.err, 1, 9) ~= 'WRONGTYPE' then\n"
        "    return v\n"
        "  end\n"
        "  if type(v) == 'table' and v.err then\n"
        "    local t = redis.call('TYPE', KEYS[i]).ok\n"
        "    if t ~= 'zset' then\n"
        "      return redis.error_reply('WRONGTYPE key \\'' .. KEYS[i] .. '\\' holds a value of "
        "another type, not a lock')\n"
        "    end\n"
        "    if redis.call('ZSCORE', KEYS[i], '__distlock_semaphore__') then\n"
        "      return redis.error_reply('WRONGTYPE \\'' .. KEYS[i] .. '\\' is a semaphore, "
        "not a lock')\n"
        "    end\n"
        /* another library's sorted set (scores that are no expiry of ours:
         * ZSET_FOREIGN_CHECK's rule) is a key of another type, never swept */
        "    if redis.call('ZCOUNT', KEYS[i], '-inf', 1000000000000) > 0 then\n"
        "      return redis.error_reply('WRONGTYPE \\'' .. KEYS[i] .. '\\' holds a sorted set "
        "of another kind, not a lock')\n"
        "    end\n"
        "    if not now then\n"
        "      local tm = redis.call('TIME')\n"
        "      now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)\n"
        "    end\n"
        "    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)\n"
        "    local live = redis.call('ZCARD', KEYS[i])\n"
        "    if redis.call('ZSCORE', KEYS[i], '__write__') then live = live - 1 end\n"
        "    if live > 0 then\n"
        "      local top = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')\n"
        "      return {0, math.max(tonumber(top[2]) - now, 1), i}\n"
        "    end\n"
        "    zs[i], v = true, false\n"
        "  end\n"
        "  if v and v ~= ARGV[1] then return {0, redis.call('PTTL', KEYS[i]), i} end\n"
        "  fresh[i] = (v == false)\n"
        "  if fencing then\n"
        "    local f = redis.pcall('GET', KEYS[m + i])\n"
        "    if f and (type(f) == 'table' or not tonumber(f)) then\n"
        "      return redis.error_reply('fence counter ' .. KEYS[m + i] .. ' is not an integer')\n"
        "    end\n"
        "  end\n"
        "end\n"
        "local r = {1}\n"
        "for i = 1, m do\n"
        "  local fv = -1\n"
        "  if fencing then\n"
        "    if fresh[i] then fv = redis.call('INCR', KEYS[m + i])\n"
        "    else fv = tonumber(redis.call('GET', KEYS[m + i]) or '0') end\n"
        "  end\n"
        "  if zs[i] then redis.call('DEL', KEYS[i]) end\n"
        "  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])\n"
        "  r[i + 1] = fv\n"
        "end\n"
        "return r\n" },
    [DISTLOCK__S_RELEASE_MANY] = { "release_many", BODY_RELEASE_MANY(PUB_CLASSIC) },
    [DISTLOCK__S_RELEASE_MANY_SH] = { "release_many_sh",
        PUBLISH_SHARD_FN BODY_RELEASE_MANY(PUB_SHARD) },
    [DISTLOCK__S_EXTEND_MANY] = { "extend_many",
        /* KEYS: k1..km; ARGV: token ttl_ms. Answers per key, {r1..rm}: 1
         * renewed (it held our token), 0 not ours. The set is held while
         * each key is held on a quorum, not only on the nodes that hold
         * every key: a node that lost key a still renews key b, and the
         * caller tallies each key's quorum (keyset.c), as the watchdog
         * does with S_EXTEND. */
        MANY_REFUSED_FIRST
        "local r = {}\n"
        "for i = 1, #KEYS do\n"
        "  if redis.pcall('GET', KEYS[i]) == ARGV[1] then\n"
        "    redis.call('PEXPIRE', KEYS[i], ARGV[2])\n"
        "    r[i] = 1\n"
        "  else\n"
        "    r[i] = 0\n"
        "  end\n"
        "end\n"
        "return r\n" },
    [DISTLOCK__S_RAISE_MANY] = { "raise_many",
        /* KEYS: k1..km f1..fm; ARGV: token F1..Fm. The second fencing round
         * for N > 1, per key as S_RAISE: only where every key of the set
         * still holds our token. */
        "local m = #KEYS / 2\n"
        "for i = 1, m do\n"
        "  if redis.pcall('GET', KEYS[i]) ~= ARGV[1] then return 0 end\n"
        "end\n"
        "for i = 1, m do\n"
        "  local cur = tonumber(redis.call('GET', KEYS[m + i]) or '0')\n"
        "  if cur < tonumber(ARGV[i + 1]) then redis.call('SET', KEYS[m + i], ARGV[i + 1]) end\n"
        "end\n"
        "return 1\n" },
};

/* ------------------------------------------------------------ names */

/* The names are the same on every kind of node (the seed PHP code and
 * earlier versions use them on plain masters: wire compatibility), and they
 * are in the key's Redis Cluster slot for every key but one with a '}' and
 * no hash tag: a cluster client refuses fencing and fair mode for such a
 * key at the API (distlock__sidekeys_in_slot), so no script ever gets a
 * CROSSSLOT. Cases:
 *   "order:{42}"  -> "order:{42}:fence"   (its tag "42" is kept)
 *   "plain"       -> "{plain}:fence"      (the whole key becomes the tag)
 *   "a{b" (no }) -> "{a{b}:fence"        (tag "a{b" = the whole key)
 *   "a}b", "{}x"  -> "a}b:fence"          (hashes differently: refused on a cluster) */
void distlock__sidekey(char *buf, const char *key, const char *suffix)
{
    /* Same hash slot as the key: reuse its {hashtag} if it has a valid one,
     * else make the whole key the tag. */
    const char *open = strchr(key, '{');
    const char *close = open ? strchr(open + 1, '}') : NULL;
    if (open && close && close > open + 1)
        snprintf(buf, DISTLOCK__SIDEKEY_MAX, "%s%s", key, suffix);
    else if (strchr(key, '}') == NULL)
        snprintf(buf, DISTLOCK__SIDEKEY_MAX, "{%s}%s", key, suffix);
    else
        snprintf(buf, DISTLOCK__SIDEKEY_MAX, "%s%s", key, suffix);
}

int distlock__is_sidekey(const char *k, size_t len, const char *suffix)
{
    char base[DISTLOCK__SIDEKEY_MAX], side[DISTLOCK__SIDEKEY_MAX];
    size_t sl = strlen(suffix);
    if (len <= sl || len - sl > DISTLOCK_KEY_MAX || memcmp(k + len - sl, suffix, sl) != 0 ||
        memchr(k, '\0', len) != NULL)
        return 0;
    /* The lock key is what precedes the suffix ("a{t}b:fence"), or that
     * without the braces sidekey added ("{job:1}:fence"). */
    size_t bl = len - sl;
    for (int strip = 0; strip <= 1; strip++) {
        if (strip && (bl < 3 || k[0] != '{' || k[bl - 1] != '}'))
            break;
        memcpy(base, k + strip, bl - 2 * (size_t)strip);
        base[bl - 2 * (size_t)strip] = '\0';
        distlock__sidekey(side, base, suffix);
        if (strlen(side) == len && memcmp(side, k, len) == 0)
            return 1;
    }
    return 0;
}

int distlock__sidekeys_in_slot(const char *key)
{
    static const char *const suffixes[] = { DISTLOCK__FENCE_SUFFIX, ":q", ":qt",
                                            DISTLOCK__OWNER_SUFFIX, DISTLOCK__WRITERS_SUFFIX };
    char buf[DISTLOCK__SIDEKEY_MAX];
    unsigned slot = distlock__key_slot(key, strlen(key));
    for (size_t k = 0; k < sizeof(suffixes) / sizeof(suffixes[0]); k++) {
        distlock__sidekey(buf, key, suffixes[k]);
        if (distlock__key_slot(buf, strlen(buf)) != slot)
            return 0;
    }
    return 1;
}

size_t distlock__channel_name(char *buf, const char *key)
{
    size_t n = strlen(key);  /* <= DISTLOCK_KEY_MAX, checked by every entry point */
    memcpy(buf, "distlock:", 9);
    memcpy(buf + 9, key, n + 1);
    return 9 + n;
}

int distlock__channel_is_of(const char *channel, const char *key)
{
    return strncmp(channel, "distlock:", 9) == 0 && strcmp(channel + 9, key) == 0;
}

size_t distlock__shard_channel_name(char *buf, const char *key)
{
    const char *open = strchr(key, '{');
    const char *close = open ? strchr(open + 1, '}') : NULL;
    if (open && close && close > open + 1)
        return distlock__channel_name(buf, key);
    if (strchr(key, '}') == NULL)
        return (size_t)snprintf(buf, DISTLOCK__SIDEKEY_MAX, "distlock:{%s}", key);
    /* "a}b", "{}x": no name with the key in its hash tag; a decimal tag of
     * the same slot (every slot has one below 10^6: 16384 slots) */
    unsigned slot = distlock__key_slot(key, strlen(key));
    char tag[16];
    unsigned long n = 0;
    for (; n < 1000000ul; n++) {
        int tl = snprintf(tag, sizeof(tag), "%lu", n);
        if (distlock__key_slot(tag, (size_t)tl) == slot)
            break;
    }
    return (size_t)snprintf(buf, DISTLOCK__SIDEKEY_MAX, "distlock:{%lu}%s", n, key);
}

void distlock__call_sharded(distlock__call *call, int sh, int arg, char *buf, const char *key)
{
    call->cl_script = sh;
    call->cl_chan_arg = arg;
    call->cl_chan = buf;
    call->cl_chan_len = distlock__shard_channel_name(buf, key);
}

/* The transport's ordering domain for requests about this ownership: a
 * request with the same key and token never overtakes an earlier one on a
 * node (round.c). A collision only orders two requests needlessly, so the
 * hash is a fast one: eight bytes at a time (every request computes it,
 * over a key and a 32-byte token), each word multiplied in and folded. */
static uint64_t tag_add(uint64_t h, const char *s)
{
    size_t n = strlen(s);
    uint64_t w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    w = n;  /* with the tail's length: where the key ends and the token begins */
    for (size_t k = 0; k < n; k++)
        w |= (uint64_t)(unsigned char)s[k] << (8 * (k + 1));
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

uint64_t distlock__lock_tag(const char *key, const char *token)
{
    uint64_t h = tag_add(tag_add(1469598103934665603ull, key), token);
    return h ? h : 1;
}

/* ------------------------------------------------------------ replies */

/* A DONE result's reply alone (before the WAIT behind it is considered). */
static int verdict_of_reply(const distlock__result *r)
{
    {
        const redisReply *x = r->reply;
        if (x->type == REDIS_REPLY_INTEGER)
            return x->integer == 1;
        if (x->type == REDIS_REPLY_NIL)      /* SET NX GET: was free, now ours */
            return 1;
        if (x->type == REDIS_REPLY_STRING)   /* SET NX GET: the holder's token */
            return 0;
        /* A Redis Cluster slot being migrated, with the lock key and its
         * side keys on different sides (Redis 7.0 answers this for the
         * whole migration): the acquire ran nothing; not granted for now,
         * so a waiting acquire backs off and tries again within its budget.
         * (For a release or an extend it stays a failure.) */
        if (x->type == REDIS_REPLY_ERROR && strncmp(x->str, "TRYAGAIN", 8) == 0 &&
            (r->script == DISTLOCK__S_ACQUIRE || r->script == DISTLOCK__S_FAIR ||
             r->script == DISTLOCK__S_ACQUIRE_MANY))
            return 0;
        /* A set's release or extend answers per key: the node did
         * something for the set when any key was ours there (what the set
         * needs is each key's quorum: distlock__reply_key_verdict). */
        if (x->type == REDIS_REPLY_ARRAY && x->elements >= 1 &&
            (r->script == DISTLOCK__S_EXTEND_MANY || r->script == DISTLOCK__S_RELEASE_MANY ||
             r->script == DISTLOCK__S_RELEASE_MANY_SH)) {
            int any = 0;
            for (size_t j = 0; j < x->elements; j++) {
                if (x->element[j]->type != REDIS_REPLY_INTEGER)
                    return -1;
                any |= x->element[j]->integer == 1;
            }
            return any;
        }
        if (x->type == REDIS_REPLY_ARRAY && x->elements >= 1 &&
            x->element[0]->type == REDIS_REPLY_INTEGER)
            return x->element[0]->integer == 1;
        return -1;
    }
}

int distlock__reply_key_verdict(const distlock__result *r, size_t j)
{
    if (r->state != DISTLOCK__R_DONE)
        return r->state == DISTLOCK__R_FAILED ? -1 : -2;
    const redisReply *x = r->reply;
    if (x == NULL || x->type != REDIS_REPLY_ARRAY || x->elements <= j ||
        x->element[j]->type != REDIS_REPLY_INTEGER ||
        (x->element[j]->integer != 0 && x->element[j]->integer != 1))
        return -1;
    if (x->element[j]->integer == 0)
        return 0;
    /* renewed or deleted, but the WAIT behind it fell short: failed there */
    return r->wait_n > 0 && r->acked < r->wait_n ? -1 : 1;
}

int distlock__wait_short(const distlock__result *r)
{
    return r->state == DISTLOCK__R_DONE && r->wait_n > 0 && r->acked < r->wait_n &&
           verdict_of_reply(r) == 1;
}

/* 1 granted, 0 refused, -1 failed, -2 no answer (yet).
 * A grant followed by a WAIT that fewer replicas than asked acknowledged
 * (or that failed) is a failure of that node: it does not count toward the
 * quorum, and the attempt's undo covers it (fail-closed). */
int distlock__reply_verdict(const distlock__result *r)
{
    if (r->state == DISTLOCK__R_DONE) {
        int v = verdict_of_reply(r);
        if (v == 1 && r->wait_n > 0 && r->acked < r->wait_n)
            return -1;
        return v;
    }
    return r->state == DISTLOCK__R_FAILED ? -1 : -2;
}

/* The error text of a reply, or of its first element (the extend script
 * answers per key), else NULL. */
const char *distlock__reply_error(const distlock__result *r)
{
    const redisReply *x = r->state == DISTLOCK__R_DONE ? r->reply : NULL;
    if (x && x->type == REDIS_REPLY_ARRAY && x->elements >= 1)
        x = x->element[0];
    return x && x->type == REDIS_REPLY_ERROR ? x->str : NULL;
}

int distlock__reply_refused(const distlock__result *r)
{
    return distlock__reply_verdict(r) == -1 && distlock__reply_error(r) != NULL &&
           !distlock__reply_unavailable(r);
}

int distlock__reply_unavailable(const distlock__result *r)
{
    const redisReply *x = r->state == DISTLOCK__R_DONE ? r->reply : NULL;
    if (x == NULL || x->type != REDIS_REPLY_ERROR)
        return 0;
    return strncmp(x->str, "CLUSTERDOWN", 11) == 0 || strncmp(x->str, "TRYAGAIN", 8) == 0 ||
           strncmp(x->str, "MOVED ", 6) == 0 || strncmp(x->str, "ASK ", 4) == 0;
}

int64_t distlock__reply_int(const distlock__result *r, size_t idx)
{
    const redisReply *x = r->reply;
    if (x && x->type == REDIS_REPLY_ARRAY && x->elements > idx &&
        x->element[idx]->type == REDIS_REPLY_INTEGER)
        return x->element[idx]->integer;
    return -1;
}

/* One SCAN step, then TYPE of each key it found (string keys are the ones
 * that may be locks), in the server: the same reply as SCAN ... TYPE and
 * the same one round trip per step, where a filter in the client would
 * ask TYPE once per key. The keys come from this node's SCAN, so they are
 * local on a cluster node too. */
const char distlock__scan_leases_script[] =
    "local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])\n"
    "local keys = {}\n"
    "for _, k in ipairs(r[2]) do\n"
    "  local ty = redis.call('TYPE', k).ok\n"
    "  if ty == 'string' then\n"
    "    keys[#keys + 1] = k\n"
    "  elseif ty == 'zset' then\n"
    "    local low = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')\n"
    "    if redis.call('ZSCORE', k, '__distlock_semaphore__') or"
    " redis.call('ZSCORE', k, '__write__') or"
    " (low[2] and tonumber(low[2]) > 1000000000000) then keys[#keys + 1] = k end\n"
    "  end\n"
    "end\n"
    "return {r[1], keys}\n";

const char distlock__scan_strings_script[] =
    "local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])\n"
    "local keys = {}\n"
    "for _, k in ipairs(r[2]) do\n"
    "  if redis.call('TYPE', k).ok == 'string' then keys[#keys + 1] = k end\n"
    "end\n"
    "return {r[1], keys}\n";

/* The key held our own token before this request ran: SET NX GET returned
 * it, or the acquire script refreshed it ({1, fence, 1}) or refused it as
 * strict ({0, pttl, 1}). (Of the request's last send: the caller checks
 * r->resent, a first send that may have set it.) */
int distlock__reply_held_own(const distlock__result *r, const char *token)
{
    const redisReply *x = r->state == DISTLOCK__R_DONE ? r->reply : NULL;
    if (distlock__reply_holds_own(r, token))
        return 1;
    return x != NULL && r->script == DISTLOCK__S_ACQUIRE && x->type == REDIS_REPLY_ARRAY &&
           x->elements >= 3 && x->element[0]->type == REDIS_REPLY_INTEGER &&
           x->element[0]->integer == 1 && x->element[2]->type == REDIS_REPLY_INTEGER &&
           x->element[2]->integer == 1;
}

/* The node refused because the key already holds our own token: SET NX GET
 * returns it; the acquire script says so in a strict refusal. */
int distlock__reply_holds_own(const distlock__result *r, const char *token)
{
    const redisReply *x = r->state == DISTLOCK__R_DONE ? r->reply : NULL;
    if (x == NULL)
        return 0;
    if (x->type == REDIS_REPLY_STRING)
        return strcmp(x->str, token) == 0;
    /* r->script, not r->call->script: the call was the caller's, on a stack
     * frame that may be gone by now (first_round's) */
    return r->script == DISTLOCK__S_ACQUIRE && x->type == REDIS_REPLY_ARRAY &&
           x->elements >= 3 && x->element[0]->type == REDIS_REPLY_INTEGER &&
           x->element[0]->integer == 0 && x->element[2]->type == REDIS_REPLY_INTEGER &&
           x->element[2]->integer == 1;
}

