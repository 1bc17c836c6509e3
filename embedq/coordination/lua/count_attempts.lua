-- One more attempt per fingerprint, each counter kept ARGV[2] seconds; returns the new
-- counts in order. KEYS[1]: the bucket's stats hash (it names the hash slot). ARGV: the
-- prefix of attempt counters (layout.kind_prefix), ttl s, the fingerprints joined by commas.
local prefix, ttl = ARGV[1], ARGV[2]
local counts = {}
for fp in string.gmatch(ARGV[3], '[^,]+') do
  local key = prefix .. fp
  counts[#counts + 1] = redis.call('INCR', key)
  redis.call('EXPIRE', key, ttl)
end
return counts
