-- Run leases, unless the vector is stored: per fingerprint, atomically.
-- KEYS[1]: the bucket's stats hash (it names the hash slot; every key formed here has its
-- tag). ARGV: the prefixes of run leases, hot vectors and attempt counters
-- (layout.kind_prefix), owner, ttl ms, the fingerprints joined by commas.
-- Per fingerprint, in order: the vector when it exists (nothing leased); else, where SET NX
-- wins the lease, the attempt count earlier runs left (a number, 0 when absent); else false.
local run, vec, att, owner, ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local out = {}
local i = 0
for fp in string.gmatch(ARGV[6], '[^,]+') do
  i = i + 1
  local vector = redis.call('GET', vec .. fp)
  if vector then
    out[i] = vector
  elseif redis.call('SET', run .. fp, owner, 'NX', 'PX', ttl) then
    out[i] = tonumber(redis.call('GET', att .. fp) or '0')
  else
    out[i] = false
  end
end
return out
