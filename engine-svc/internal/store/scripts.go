package store

import (
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// commitRing is how many of a run's latest commit ids its hash keeps
// (commitScript). A commit's reply can be settled while fewer than this
// many other commits have followed it; after that its expected version
// is long gone, so a late copy is refused as a conflict and writes nothing.
const commitRing = 8

// commitIDLen is the length of a commit id: 16 random bytes in hex.
const commitIDLen = 32

// The scripts never parse JSON: they compare and move opaque strings, so
// they stay cheap and run the same on Redis and miniredis. Every key they
// touch is passed in KEYS and shares the run's bucket hash tag.

// commitScript is the compare-and-set of one run.
//
//	KEYS: run, out, ev, one key per index op (in order), idem key (when set)
//	ARGV: 1 expect ("-1" = create), 2 new version, 3 doc,
//	      4 idem on ("1"/"0"), 5 idem expect ("" = free), 6 run id, 7 ttl ms ("0" = none),
//	      8 #output sets, 9 #output deletes, 10 #evidence, 11 #index ops,
//	      12 commit id (commitIDLen hex characters),
//	      then set pairs, delete fields, evidence entries, index ops (op, score, member).
//
// Replies 1 on success (an integer, not an array: the client reads it
// without allocating), {0, stored version or "-1"} on a version conflict,
// {2, key holder or "", stored version or "-1"} on a key conflict, and
// {3, stored version} for any change but a create to a packed run
// (packed.go): nothing is written, and CommitRun unpacks the run (its
// commit ids with it) and sends the change again, which then gets its
// true answer.
//
// The script is idempotent on its commit id: the run keeps the ids of its
// last commitRing commits (field "cids", newest first), and a commit whose
// id is among them replies 1 again without writing the change twice. So a
// commit whose reply was lost can be sent again (by go-redis's retry or by
// CommitRun's settling) and the second answer tells whether the first
// landed. The repeat still writes "cids" back to itself: that is a write,
// so a WAIT on the repeat's connection covers the state the first one left.
var commitScript = redis.NewScript(commitSource)

// commitSource is commitScript's body: a commit sent to a server that lost
// its script cache is sent again with it (see evalCommit).
var commitSource = strings.ReplaceAll(`
local cid = ARGV[12]
local got = redis.call('HMGET', KEYS[1], 'cids', 'v', 'pk')
local ids, cur = got[1], got[2]
if ids then
  -- A plain find, kept only where it starts on an id's boundary.
  local at = string.find(ids, cid, 1, true)
  while at do
    if (at - 1) % #cid == 0 then
      redis.call('HSET', KEYS[1], 'cids', ids)
      return 1
    end
    at = string.find(ids, cid, at + 1, true)
  end
end
if ARGV[1] == '-1' then
  if cur then return {0, cur} end
elseif got[3] then
  return {3, cur}
elseif cur ~= ARGV[1] then
  return {0, cur or '-1'}
end
local nSet, nDel, nEv, nIdx = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local idemKey = KEYS[4 + nIdx]
if ARGV[4] == '1' then
  local holder = redis.call('GET', idemKey) or ''
  if holder ~= ARGV[5] then return {2, holder, cur or '-1'} end
end

redis.call('HSET', KEYS[1], 'v', ARGV[2], 'doc', ARGV[3],
  'cids', cid .. string.sub(ids or '', 1, #cid * (COMMIT_RING - 1)))
local i = 13
-- batch sends count arguments from ARGV[i] in one call, or in chunks
-- small enough for unpack.
local function batch(cmd, key, count)
  if count == 0 then return end
  if count <= 512 then
    redis.call(cmd, key, unpack(ARGV, i, i + count - 1))
    i = i + count
    return
  end
  local args = {}
  for _ = 1, count do
    args[#args + 1] = ARGV[i]
    i = i + 1
    if #args == 512 then
      redis.call(cmd, key, unpack(args))
      args = {}
    end
  end
  if #args > 0 then redis.call(cmd, key, unpack(args)) end
end
batch('HSET', KEYS[2], nSet * 2)
batch('HDEL', KEYS[2], nDel)
batch('RPUSH', KEYS[3], nEv)
for k = 1, nIdx do
  if ARGV[i] == 'a' then
    redis.call('ZADD', KEYS[3 + k], ARGV[i + 1], ARGV[i + 2])
  else
    redis.call('ZREM', KEYS[3 + k], ARGV[i + 2])
  end
  i = i + 3
end
if ARGV[4] == '1' then
  if ARGV[7] ~= '0' then
    redis.call('SET', idemKey, ARGV[6], 'PX', ARGV[7])
  else
    redis.call('SET', idemKey, ARGV[6])
  end
end
return 1
`, "COMMIT_RING", strconv.Itoa(commitRing))

// deleteScript removes a run's keys, its member in each run index and,
// when ARGV[2] is "1", its idempotency key (the last KEYS entry) if that
// still names the run. With ARGV[3] set, only while the run is at that
// version.
//
//	KEYS: run, out, ev, run index keys…[, idem key]   ARGV: 1 run id, 2 "1" with an idem key, 3 version ("" = any)
//
// Replies 1 if the run existed, else 0; {-1, stored version} and nothing
// deleted when the run has moved past ARGV[3].
var deleteScript = redis.NewScript(`
if ARGV[3] ~= '' then
  local cur = redis.call('HGET', KEYS[1], 'v')
  if cur and cur ~= ARGV[3] then return {-1, cur} end
end
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
local last = #KEYS
if ARGV[2] == '1' then
  if redis.call('GET', KEYS[last]) == ARGV[1] then redis.call('DEL', KEYS[last]) end
  last = last - 1
end
for k = 4, last do
  redis.call('ZREM', KEYS[k], ARGV[1])
end
return existed
`)

// putWorkflowScript allocates the next version of a workflow, stores it
// and, when ARGV[4] is above 0, deletes the versions older than the
// newest ARGV[4] in the same script, so no reader ever sees more than that
// many, nor a gap among them.
//
//	KEYS: wf hash   ARGV: 1 definition, 2 registered at (ms), 3 registration id,
//	                      4 versions to keep ("0" = all)
//
// Replies the new version number. The hash keeps the last registration's
// id and version (field "reg"), so a repeat of a registration whose reply
// was lost replies its version again instead of storing a second one.
// Field "first" is the oldest version that may still be stored (absent:
// 1), so a put deletes only what the last one left. One put deletes at
// most PRUNE_BATCH versions (a script blocks the server while it runs): a
// store that kept thousands and is now told to keep 20 sheds them over the
// next puts.
var putWorkflowScript = redis.NewScript(strings.ReplaceAll(`
local last = redis.call('HGET', KEYS[1], 'reg')
if last and string.sub(last, 1, #ARGV[3] + 1) == ARGV[3] .. ' ' then
  return tonumber(string.sub(last, #ARGV[3] + 2))
end
local n = redis.call('HINCRBY', KEYS[1], 'latest', 1)
redis.call('HSET', KEYS[1], 'v' .. n, ARGV[1], 't' .. n, ARGV[2], 'reg', ARGV[3] .. ' ' .. n)
local keep = tonumber(ARGV[4])
if keep > 0 and n > keep then
  local first = tonumber(redis.call('HGET', KEYS[1], 'first') or '1')
  local stop = math.min(n - keep, first + PRUNE_BATCH - 1)
  if stop >= first then
    local fields = {}
    for v = first, stop do
      fields[#fields + 1] = 'v' .. v
      fields[#fields + 1] = 't' .. v
      if #fields == 512 then
        redis.call('HDEL', KEYS[1], unpack(fields))
        fields = {}
      end
    end
    if #fields > 0 then redis.call('HDEL', KEYS[1], unpack(fields)) end
    redis.call('HSET', KEYS[1], 'first', stop + 1)
  end
end
return n
`, "PRUNE_BATCH", strconv.Itoa(pruneBatch)))

// pruneBatch bounds the versions one put deletes (putWorkflowScript).
const pruneBatch = 1000

// reapScript removes one piece of run-less residue, only while the run's
// document is still absent.
//
//	KEYS: run, target   ARGV: 1 op ("del", "zrem" member, "idem" holder), 2 run id
//
// Replies 1 if something was removed, 0 if it was already gone (or the key
// now names another run), -1 if the run exists (not residue).
var reapScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
if ARGV[1] == 'zrem' then return redis.call('ZREM', KEYS[2], ARGV[2]) end
if ARGV[1] == 'idem' and redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
return redis.call('DEL', KEYS[2])
`)

// pointKeyScript points an idempotency key at a run if it holds what the
// caller read.
//
//	KEYS: idem key   ARGV: 1 run id, 2 expect ("" = unset), 3 ttl ms ("0" = none)
//
// Replies 1 if written (or already pointing at the run: a repeat), 0 if
// the key had moved.
var pointKeyScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1]) or ''
if cur == ARGV[1] then return 1 end
if cur ~= ARGV[2] then return 0 end
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
`)

// rewriteWorkflowScript replaces one stored version of a definition if it
// still holds what the caller read.
//
//	KEYS: wf hash   ARGV: 1 field (v<n>), 2 old definition, 3 new definition
//
// Replies 1 if written (or already holding the new text: a repeat), 0 if
// the version changed or is gone.
var rewriteWorkflowScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur == ARGV[3] then return 1 end
if cur ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
`)

// packScript packs a run (packed.go) at the version its parts were read
// at: it sets pk, counts the pack in g, deletes the document and commit
// ids fields, the outputs hash and the evidence list, and takes the run
// out of the pack index. The lengths are checked as well as the version: a
// run whose version has not moved has the parts that were read.
//
//	KEYS: run, out, ev, pack index   ARGV: 1 version, 2 pk, 3 #evidence, 4 #outputs, 5 run id
//
// Replies {1} packed, {2} already packed, {0, stored version or "-1"}
// when the run moved or is gone.
var packScript = redis.NewScript(`
local got = redis.call('HMGET', KEYS[1], 'v', 'pk')
if got[1] ~= ARGV[1] then return {0, got[1] or '-1'} end
if got[2] then
  redis.call('ZREM', KEYS[4], ARGV[5])
  return {2}
end
if ARGV[2] == '' then return {0, got[1]} end -- read packed, unpacked since
if redis.call('LLEN', KEYS[3]) ~= tonumber(ARGV[3]) or redis.call('HLEN', KEYS[2]) ~= tonumber(ARGV[4]) then
  return redis.error_reply('ERR pack: the run changed without a new version')
end
redis.call('HSET', KEYS[1], 'pk', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'g', 1)
redis.call('HDEL', KEYS[1], 'doc', 'cids')
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[5])
return {1}
`)

// unpackScript writes a packed run's parts back as a document and commit
// ids fields, an outputs hash and an evidence list, while the run is still
// packed at the version and generation its pk was read at, and puts it
// back in the pack index (scored now): a commit to it that is refused
// leaves it as it was written, and the sweeper packs it again.
//
//	KEYS: run, out, ev, pack index
//	ARGV: 1 version, 2 generation, 3 doc, 4 commit ids, 5 #outputs, 6 #evidence,
//	      7 run id, 8 score (ms), then output name/value pairs, then evidence entries
//
// Replies 1 unpacked, 0 when the run moved, was unpacked or is gone.
var unpackScript = redis.NewScript(`
local got = redis.call('HMGET', KEYS[1], 'v', 'g', 'pk')
if got[1] ~= ARGV[1] or got[2] ~= ARGV[2] or not got[3] then return 0 end
redis.call('HSET', KEYS[1], 'doc', ARGV[3])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'cids', ARGV[4]) end
redis.call('HDEL', KEYS[1], 'pk')
redis.call('HINCRBY', KEYS[1], 'g', 1)
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('ZADD', KEYS[4], ARGV[8], ARGV[7])
local i = 9
local function batch(cmd, key, count)
  while count > 0 do
    local n = math.min(count, 512)
    redis.call(cmd, key, unpack(ARGV, i, i + n - 1))
    i, count = i + n, count - n
  end
end
batch('HSET', KEYS[2], 2 * tonumber(ARGV[5]))
batch('RPUSH', KEYS[3], tonumber(ARGV[6]))
return 1
`)
