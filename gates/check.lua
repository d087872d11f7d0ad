-- Decides one attempt, atomically, on Redis's clock. state.lua is prepended.
-- KEYS: 1 breaker state, 2 probe owner, 3 rate-limit window
-- ARGV: 1 threshold (0 = breaker off), 2 attempt, 3 retry limit per second,
--       4 probe TTL ms, 5 unique token, 6 state TTL ms, 7 probe-busy defer ms,
--       8 breaker reset ms
-- Returns {allow, reason, defer_ms, probe, from_state, to_state, invalid}
-- reason: 0 none, 1 rate limited, 2 circuit open, 3 probe busy
-- invalid: the sum of the keys found invalid, treated as absent and deleted:
--          1 breaker state, 2 probe owner, 4 rate-limit window
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local probe, from, to, invalid = 0, '', '', 0
if tonumber(ARGV[1]) > 0 then
  local st, bad = read_state(KEYS[1], now, tonumber(ARGV[8]))
  if bad then invalid = invalid + 1 end
  if st then
    if st.state == 'open' then
      if now < st.resetAt then
        return {0, 2, math.ceil(st.resetAt - now), 0, '', '', invalid}
      end
      st.state = 'half-open'
      from, to = 'open', 'half-open'
      redis.call('SET', KEYS[1], cjson.encode(st), 'PX', ARGV[6])
    end
    if st.state == 'half-open' then
      -- A probe owner that never expires, or not within the probe TTL, was
      -- not set by a worker: it would hold every other worker off for ever.
      local pttl = redis.call('PTTL', KEYS[2])
      if pttl == -1 or pttl > tonumber(ARGV[4]) then
        redis.call('DEL', KEYS[2])
        invalid = invalid + 2
      end
      if redis.call('SET', KEYS[2], ARGV[5], 'NX', 'PX', ARGV[4]) then
        probe = 1
      else
        return {0, 3, tonumber(ARGV[7]), 0, from, to, invalid}
      end
    end
  end
end
if tonumber(ARGV[2]) >= 2 then
  local kt = redis.call('TYPE', KEYS[3]).ok
  local rl_bad = kt ~= 'zset' and kt ~= 'none'
  if rl_bad then
    redis.call('DEL', KEYS[3])
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - 1000)
  -- Entries after now were not made by Redis's clock: they would hold the
  -- window full.
  if redis.call('ZREMRANGEBYSCORE', KEYS[3], '(' .. now, '+inf') > 0 then
    rl_bad = true
  end
  if rl_bad then invalid = invalid + 4 end
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[3]) then
    local oldest = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    local wait = math.ceil(tonumber(oldest[2]) + 1000 - now)
    if wait < 1 then wait = 1 end
    if wait > 1000 then wait = 1000 end
    if probe == 1 then redis.call('DEL', KEYS[2]) end
    return {0, 1, wait, 0, from, to, invalid}
  end
  redis.call('ZADD', KEYS[3], now, ARGV[5])
  redis.call('PEXPIRE', KEYS[3], 2000)
end
return {1, 0, 0, probe, from, to, invalid}
