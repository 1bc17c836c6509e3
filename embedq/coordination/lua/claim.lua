-- Claims with interest: registers each caller's interest, then claims each fingerprint.
-- KEYS[1]: the bucket's stats hash (it names the hash slot; every key formed here has its
-- tag). ARGV: the prefixes of claims, interest sets and failures (layout.kind_prefix),
-- owner, claim ttl ms, interest ttl ms, the fingerprints to claim joined by commas, the
-- fingerprint of each interest joined by commas, then the caller of each interest.
-- Interest is a sorted set per fingerprint: caller id -> the epoch ms its wait ends, by
-- Redis's clock (TIME), so API and worker hosts need no common clock. The key lives as
-- long as its latest caller; members past their end are pruned on the next registration.
-- Returns 1 per claim won (free, or held by the same owner: its ttl starts again), else 0;
-- a won claim clears the fingerprint's failure.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local claims, wants, errs = ARGV[1], ARGV[2], ARGV[3]
local owner, ttl_ms, want_ttl = ARGV[4], ARGV[5], tonumber(ARGV[6])
local ends = string.format('%d', now + want_ttl)
local caller = 8
for fp in string.gmatch(ARGV[8], '[^,]+') do
  caller = caller + 1
  local key = wants .. fp
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))
  redis.call('ZADD', key, 'GT', ends, ARGV[caller])
  if redis.call('PTTL', key) < want_ttl then redis.call('PEXPIRE', key, want_ttl) end
end
local won = {}
local i = 0
for fp in string.gmatch(ARGV[7], '[^,]+') do
  i = i + 1
  local key = claims .. fp
  -- SET NX first: a free claim (the common case) costs one command, not a GET and a SET.
  if redis.call('SET', key, owner, 'NX', 'PX', ttl_ms) then
    won[i] = 1
  elseif redis.call('GET', key) == owner then
    redis.call('PEXPIRE', key, ttl_ms)
    won[i] = 1
  else
    won[i] = 0
  end
  if won[i] == 1 then redis.call('DEL', errs .. fp) end
end
return won
