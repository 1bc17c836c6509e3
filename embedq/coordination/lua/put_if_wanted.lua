-- Hot copies only where some caller waits: KEYS n vector keys, then n interest keys;
-- ARGV[1] the ttl in seconds, then the n vectors. Returns how many were stored.
local n = #KEYS / 2
local stored = 0
for i = 1, n do
  if redis.call('EXISTS', KEYS[n + i]) == 1 then
    redis.call('SET', KEYS[i], ARGV[i + 1], 'EX', ARGV[1])
    stored = stored + 1
  end
end
return stored
