-- Delete each claim or lease still held by ARGV[2]; returns how many were deleted.
-- KEYS[1]: the bucket's stats hash (it names the hash slot). ARGV: the prefix of the
-- holds (layout.kind_prefix), owner, the fingerprints joined by commas.
local prefix, owner = ARGV[1], ARGV[2]
local n = 0
for fp in string.gmatch(ARGV[3], '[^,]+') do
  local key = prefix .. fp
  if redis.call('GET', key) == owner then n = n + redis.call('DEL', key) end
end
return n
