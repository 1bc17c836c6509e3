-- Each key's ttl starts again at ARGV[1] ms (a key gone stays gone).
for i, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ARGV[1]) end
return #KEYS
