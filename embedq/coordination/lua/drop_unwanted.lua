-- KEYS[1]: the stats hash; then per (fingerprint, owner) its interest key and claim key.
-- ARGV: the owner of each pair. Returns 1 per pair whose fingerprint nobody wants (its
-- claim freed where that owner holds it), else 0; `abandoned` grows once per fingerprint.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local live = string.format('(%d', now)
local dropped = {}
local seen = {}
local n = 0
for i = 1, #ARGV do
  local want, claim = KEYS[2 * i], KEYS[2 * i + 1]
  if redis.call('ZCOUNT', want, live, '+inf') == 0 then
    dropped[i] = 1
    if redis.call('GET', claim) == ARGV[i] then redis.call('DEL', claim) end
    if not seen[want] then
      seen[want] = true
      n = n + 1
    end
  else
    dropped[i] = 0
  end
end
if n > 0 then redis.call('HINCRBY', KEYS[1], 'abandoned', n) end
return dropped
