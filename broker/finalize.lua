-- Ends requests exactly once: the only way a result reaches a reply stream.
-- KEYS[1] telemetry stream, KEYS[2] source stream to XACK (or any key when ARGV[1] == '')
-- KEYS[2+2g-1], KEYS[2+2g]: job hash and reply stream of group g (the requests of one job in
-- this call)
-- ARGV[1] group to ack in ('' = none), ARGV[2] entry id, ARGV[3] telemetry maxlen,
-- ARGV[4] reply maxlen, ARGV[5] job ttl (s), ARGV[6] batch event ('' = none), ARGV[7] '1' to
-- delete the acked entry as well (XDEL: a batch nobody will read again leaves the server's memory
-- at once rather than at the planner's next trim)
-- Then per group: its request count n, its `results` entry ('' = none), and n times: request id,
-- status, packed `result` entry ('' = not sent). A group whose requests share one status and
-- travel as one entry may come compact instead: -n, the entry, the status, then the n request
-- ids (a third of the arguments: a worker's usual call). It is ended as the long form would end
-- it, and when some of its requests had already ended it is reported, to be sent again long.
-- A group with a `results` entry whose requests have none ended yet (the usual case) is flagged
-- with one HSET and published as that one entry: its requests' own entries are not sent. When
-- some had already ended (a redelivery), the others go out one `result` entry each, flagged one
-- HSETNX each; if their entries were not sent, the group is left untouched and reported, and the
-- batch is neither acked nor its event added, so that the caller's second call (with the
-- entries) or a redelivery ends the rest.
-- Returns {results published, groups to send again with their entries...}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local groups = (#KEYS - 2) / 2
local published = 0
local again = {}
-- A batch often holds many requests of one job and one reply stream: set each TTL once.
local ttl_set = {}
local function touch(key)
  if not ttl_set[key] then
    redis.call('EXPIRE', key, ARGV[5])
    ttl_set[key] = true
  end
end
-- Whether none of the group's n requests (their ids at ARGV[first], every `stride`-th) has
-- ended, and none is listed twice; and their flag fields.
local function untouched(job, first, n, stride)
  local fields, seen = {}, {}
  for i = 0, n - 1 do
    local id = ARGV[first + stride * i]
    if seen[id] then return false, fields end
    seen[id] = true
    fields[#fields + 1] = 'd:' .. id
  end
  for _, v in ipairs(redis.call('HMGET', job, unpack(fields))) do
    if v then return false, fields end
  end
  return true, fields
end
local pos = 8
for g = 1, groups do
  local job = KEYS[2 + 2 * g - 1]
  local reply = KEYS[2 + 2 * g]
  local n = tonumber(ARGV[pos])
  local fresh = {}
  local counts = {}
  if n < 0 then
    n = -n
    local entry, status, first = ARGV[pos + 1], ARGV[pos + 2], pos + 3
    pos = first + n
    local whole, fields = untouched(job, first, n, 1)
    if whole then
      local flags = {}
      for i = 1, n do
        flags[2 * i - 1] = fields[i]
        flags[2 * i] = status
        fresh[i] = i
      end
      counts[status] = n
      redis.call('HSET', job, unpack(flags))
      redis.call('XADD', reply, 'MAXLEN', '~', ARGV[4], '*', 'm', entry)
    else
      again[#again + 1] = g
    end
  else
    local entry = ARGV[pos + 1]
    local first = pos + 2
    pos = first + 3 * n
    local whole = entry ~= '' and untouched(job, first, n, 3)
    if whole then
      local flags = {}
      for i = 0, n - 1 do
        local at = first + 3 * i
        local status = ARGV[at + 1]
        flags[#flags + 1] = 'd:' .. ARGV[at]
        flags[#flags + 1] = status
        fresh[#fresh + 1] = at
        counts[status] = (counts[status] or 0) + 1
      end
      redis.call('HSET', job, unpack(flags))
      redis.call('XADD', reply, 'MAXLEN', '~', ARGV[4], '*', 'm', entry)
    elseif n > 0 and ARGV[first + 2] == '' then
      again[#again + 1] = g
    else
      for i = 0, n - 1 do
        local at = first + 3 * i
        local status = ARGV[at + 1]
        if redis.call('HSETNX', job, 'd:' .. ARGV[at], status) == 1 then
          fresh[#fresh + 1] = at
          counts[status] = (counts[status] or 0) + 1
          redis.call('XADD', reply, 'MAXLEN', '~', ARGV[4], '*', 'm', ARGV[at + 2])
        end
      end
    end
  end
  if #fresh > 0 then
    touch(reply)
    published = published + #fresh
    for status, c in pairs(counts) do
      redis.call('HINCRBY', job, 'n_' .. status, c)
    end
    local left = redis.call('HINCRBY', job, 'remaining', -#fresh)
    touch(job)
    if left == 0 then
      local h = redis.call('HMGET', job, 'app', 'model', 'run', 'n', 'n_completed', 'n_expired',
                           'n_failed', 'n_rejected', 'submitted_ms', 'deadline_ms', 'id')
      local submitted = tonumber(h[9]) or now
      local deadline = tonumber(h[10]) or 0
      local ev = cmsgpack.pack({
        v = 1, type = 'event', event = 'job.completed', ts = now, job_id = h[11] or '',
        app = h[1] or '', model = h[2] or '', run = h[3] or '', requests = tonumber(h[4]) or 0,
        completed = tonumber(h[5]) or 0, expired = tonumber(h[6]) or 0,
        failed = tonumber(h[7]) or 0, rejected = tonumber(h[8]) or 0,
        latency_ms = now - submitted, deadline_met = (now <= submitted + deadline)
      })
      redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'm', ev)
    end
  end
end
if #again == 0 then
  if ARGV[1] ~= '' then
    redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])
    if ARGV[7] == '1' then
      redis.call('XDEL', KEYS[2], ARGV[2])
    end
  end
  if ARGV[6] ~= '' then
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'm', ARGV[6])
  end
end
local out = {published}
for _, g in ipairs(again) do out[#out + 1] = g end
return out
