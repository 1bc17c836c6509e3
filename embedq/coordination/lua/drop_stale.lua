-- Drop the fields of one hash that still hold the value a reader judged stale (a dead
-- heartbeat, a process's old hot keys); a field rewritten since the read is kept.
-- KEYS[1]: the hash. ARGV: field, value, field, value, ...
-- Returns how many fields were dropped.
local dropped = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    dropped = dropped + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return dropped
