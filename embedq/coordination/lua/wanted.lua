-- Which fingerprints some caller waits for: KEYS n interest keys. Returns the 1-based
-- indices of those that exist. A batch asks this before it writes, so that only the
-- vectors somebody waits for travel to Redis (bulk work: usually none of them).
local out = {}
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    out[#out + 1] = i
  end
end
return out
