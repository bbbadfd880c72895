-- Ends requests exactly once: the only way a result reaches a reply stream.
-- KEYS[1] telemetry stream, KEYS[2] source stream to XACK (or any key when ARGV[1] == '')
-- KEYS[2+2i-1], KEYS[2+2i]: job hash and reply stream of item i
-- ARGV[1] group to ack in ('' = none), ARGV[2] entry id, ARGV[3] telemetry maxlen,
-- ARGV[4] reply maxlen, ARGV[5] job ttl (s), ARGV[6] batch event ('' = none)
-- ARGV[6+3i-2], ARGV[6+3i-1], ARGV[6+3i]: request id, status, packed result of item i
-- Returns the number of results published (items already ended are skipped).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = (#KEYS - 2) / 2
local published = 0
-- A batch often holds many requests of one job and one reply stream: set each TTL once.
local ttl_set = {}
local function touch(key)
  if not ttl_set[key] then
    redis.call('EXPIRE', key, ARGV[5])
    ttl_set[key] = true
  end
end
for i = 1, n do
  local job = KEYS[2 + 2 * i - 1]
  local reply = KEYS[2 + 2 * i]
  local rid = ARGV[6 + 3 * i - 2]
  local status = ARGV[6 + 3 * i - 1]
  if redis.call('HSETNX', job, 'd:' .. rid, status) == 1 then
    redis.call('XADD', reply, 'MAXLEN', '~', ARGV[4], '*', 'm', ARGV[6 + 3 * i])
    touch(reply)
    published = published + 1
    redis.call('HINCRBY', job, 'n_' .. status, 1)
    local left = redis.call('HINCRBY', job, 'remaining', -1)
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
if ARGV[1] ~= '' then
  redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])
end
if ARGV[6] ~= '' then
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'm', ARGV[6])
end
return published
