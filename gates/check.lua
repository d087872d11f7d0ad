-- Decides one attempt, atomically, on Redis's clock.
-- KEYS: 1 breaker state, 2 probe owner, 3 rate-limit window
-- ARGV: 1 threshold (0 = breaker off), 2 attempt, 3 retry limit per second,
--       4 probe TTL ms, 5 unique token, 6 state TTL ms, 7 probe-busy defer ms
-- Returns {allow, reason, defer_ms, probe, from_state, to_state}
-- reason: 0 none, 1 rate limited, 2 circuit open, 3 probe busy
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local probe, from, to = 0, '', ''
if tonumber(ARGV[1]) > 0 then
  local raw = redis.call('GET', KEYS[1])
  if raw then
    local st = cjson.decode(raw)
    if st.state == 'open' then
      if now < st.resetAt then
        return {0, 2, st.resetAt - now, 0, '', ''}
      end
      st.state = 'half-open'
      from, to = 'open', 'half-open'
      redis.call('SET', KEYS[1], cjson.encode(st), 'PX', ARGV[6])
    end
    if st.state == 'half-open' then
      if redis.call('SET', KEYS[2], ARGV[5], 'NX', 'PX', ARGV[4]) then
        probe = 1
      else
        return {0, 3, tonumber(ARGV[7]), 0, from, to}
      end
    end
  end
end
if tonumber(ARGV[2]) >= 2 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - 1000)
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[3]) then
    local oldest = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    local wait = tonumber(oldest[2]) + 1000 - now
    if wait < 1 then wait = 1 end
    if probe == 1 then redis.call('DEL', KEYS[2]) end
    return {0, 1, wait, 0, from, to}
  end
  redis.call('ZADD', KEYS[3], now, ARGV[5])
  redis.call('PEXPIRE', KEYS[3], 2000)
end
return {1, 0, 0, probe, from, to}
