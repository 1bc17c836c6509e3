-- Claims with interest: registers each caller's interest, then claims each fingerprint.
-- KEYS: n claim keys, then one interest key per (fingerprint, caller), then n failure keys
--       (the failure a won claim clears).
-- ARGV: owner, claim ttl ms, n, interest ttl ms, then the caller of each interest key.
-- Interest is a sorted set per fingerprint: caller id -> the epoch ms its wait ends, by
-- Redis's clock (TIME), so API and worker hosts need no common clock. The key lives as
-- long as its latest caller; members past their end are pruned on the next registration.
-- Returns 1 per claim won (free, or held by the same owner: its ttl starts again), else 0.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local owner, ttl_ms, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local want_ttl = tonumber(ARGV[4])
local m = #ARGV - 4
local ends = string.format('%d', now + want_ttl)
for i = n + 1, n + m do
  local key = KEYS[i]
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))
  redis.call('ZADD', key, 'GT', ends, ARGV[i - n + 4])
  if redis.call('PTTL', key) < want_ttl then redis.call('PEXPIRE', key, want_ttl) end
end
local won = {}
for i = 1, n do
  local key = KEYS[i]
  local holder = redis.call('GET', key)
  if not holder then
    redis.call('SET', key, owner, 'PX', ttl_ms)
    won[i] = 1
  elseif holder == owner then
    redis.call('PEXPIRE', key, ttl_ms)
    won[i] = 1
  else
    won[i] = 0
  end
  if won[i] == 1 then redis.call('DEL', KEYS[n + m + i]) end
end
return won
