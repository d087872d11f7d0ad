-- Prepended to check.lua and record.lua. What is read from Redis is
-- validated, never trusted: a breaker state that is not a JSON object with
-- a known state, a whole number of failures in [0, 1e9] and a resetAt (ms)
-- in [0, now + the configured reset] (a hash, a string that is not JSON,
-- "NaN", 1e300, a negative count...) is treated as absent and deleted, so
-- that every worker, and the next outcome recorded, sees the same closed
-- circuit. The caller reports it; the attempt goes ahead (fail-open).
local STATES = {closed = true, open = true, ['half-open'] = true}

local function finite(x)
  return type(x) == 'number' and x == x and x > -math.huge and x < math.huge
end

local function valid_state(st, now, reset_ms)
  return type(st) == 'table' and type(st.state) == 'string' and STATES[st.state] ~= nil
    and finite(st.failures) and st.failures >= 0 and st.failures <= 1e9
    and st.failures == math.floor(st.failures)
    and finite(st.resetAt) and st.resetAt >= 0 and st.resetAt <= now + reset_ms
end

-- read_state returns the valid breaker state at key (nil when absent or
-- invalid) and whether an invalid one was found (and deleted).
local function read_state(key, now, reset_ms)
  local raw = redis.pcall('GET', key)
  if not raw then
    return nil, false
  end
  if type(raw) == 'string' then
    local ok, st = pcall(cjson.decode, raw)
    if ok and valid_state(st, now, reset_ms) then
      return st, false
    end
  end
  redis.call('DEL', key) -- not a string (WRONGTYPE), not JSON, or out of range
  return nil, true
end
