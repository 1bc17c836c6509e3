-- Which fingerprints some caller waits for. KEYS[1]: the bucket's stats hash (it names
-- the hash slot). ARGV: the prefix of interest sets (layout.kind_prefix), the fingerprints
-- joined by commas. Returns the 1-based positions of those whose interest set exists. A
-- batch asks this before it writes, so that only the vectors somebody waits for travel to
-- Redis (bulk work: usually none of them).
local prefix = ARGV[1]
local out = {}
local i = 0
for fp in string.gmatch(ARGV[2], '[^,]+') do
  i = i + 1
  if redis.call('EXISTS', prefix .. fp) == 1 then
    out[#out + 1] = i
  end
end
return out
