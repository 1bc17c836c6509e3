-- Run leases, unless the vector is stored: per fingerprint, atomically.
-- KEYS: n lease keys, n hot vector keys, n attempt counters. ARGV: owner, ttl ms.
-- Per index: the vector when it exists (nothing leased); else, where SET NX wins the
-- lease, the attempt count earlier runs left (a number, 0 when absent); else false.
local n = #KEYS / 3
local out = {}
for i = 1, n do
  local vector = redis.call('GET', KEYS[n + i])
  if vector then
    out[i] = vector
  elseif redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    out[i] = tonumber(redis.call('GET', KEYS[2 * n + i]) or '0')
  else
    out[i] = false
  end
end
return out
