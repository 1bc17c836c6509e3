-- One more attempt per counter, each kept ARGV[1] seconds; returns the new counts.
local counts = {}
for i, key in ipairs(KEYS) do
  counts[i] = redis.call('INCR', key)
  redis.call('EXPIRE', key, ARGV[1])
end
return counts
