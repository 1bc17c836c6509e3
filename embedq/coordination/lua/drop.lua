-- Delete keys of one bucket by kind. KEYS[1]: the bucket's stats hash (it names the hash
-- slot). ARGV: pairs of a prefix (layout.kind_prefix) and the fingerprints joined by
-- commas. Returns how many keys existed.
local n = 0
for k = 1, #ARGV, 2 do
  local prefix = ARGV[k]
  for fp in string.gmatch(ARGV[k + 1], '[^,]+') do
    n = n + redis.call('DEL', prefix .. fp)
  end
end
return n
