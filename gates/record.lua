-- Records the outcome of an allowed attempt in the breaker, atomically.
-- state.lua is prepended.
-- KEYS: 1 breaker state, 2 probe owner
-- ARGV: 1 outcome (the attempt's class: delivered, retryable or permanent),
--       2 probe (0/1), 3 threshold, 4 reset ms, 5 state TTL ms
-- Returns {from_state, to_state, invalid}
-- invalid: 1 when the stored state was invalid: treated as absent (closed,
--          no failures) and deleted or replaced
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local st, bad = read_state(KEYS[1], now, tonumber(ARGV[4]))
local invalid = 0
if bad then invalid = 1 end
if not st then st = {state = 'closed', failures = 0, resetAt = 0} end
local from = st.state
local outcome = ARGV[1]
if tonumber(ARGV[2]) == 1 then
  redis.call('DEL', KEYS[2])
  if outcome == 'retryable' then
    st.state, st.failures, st.resetAt = 'open', math.min(st.failures + 1, 1e9), now + tonumber(ARGV[4])
  else
    -- success, or a permanent failure: the consumer is reachable again
    st.state, st.failures, st.resetAt = 'closed', 0, 0
  end
elseif st.state == 'closed' and outcome == 'retryable' then
  st.failures = math.min(st.failures + 1, 1e9)
  if st.failures >= tonumber(ARGV[3]) then
    st.state, st.resetAt = 'open', now + tonumber(ARGV[4])
  end
elseif st.state == 'closed' and outcome == 'delivered' and st.failures > 0 then
  st.failures = 0
else
  -- nothing to change (a permanent failure, a success with no failures, or
  -- a late non-probe outcome while open or half-open)
  return {from, from, invalid}
end
redis.call('SET', KEYS[1], cjson.encode(st), 'PX', ARGV[5])
return {from, st.state, invalid}
