-- Each lease's ttl starts again at ARGV[2] ms (a lease gone stays gone). KEYS[1]: the
-- bucket's stats hash (it names the hash slot). ARGV: the prefix of run leases
-- (layout.kind_prefix), ttl ms, the fingerprints joined by commas.
local prefix, ttl = ARGV[1], ARGV[2]
local n = 0
for fp in string.gmatch(ARGV[3], '[^,]+') do
  redis.call('PEXPIRE', prefix .. fp, ttl)
  n = n + 1
end
return n
