-- multistep.lua's decision of one limit by one algorithm's steps
-- (algorithm.FillSteps): its check, the string MGET read (read again by
-- GET when missing), the state read and checked, and the step, consuming
-- in memory. The steps come with their script's header comment, which
-- describes the algorithm's own decision script (its prelude and reply),
-- not this one.
-- CHECK
if fail then
  return redis.error_reply(fail)
end
if not raw then
  raw = redis.call('GET', key)
end
local hex = false
state, code = raw, -1
if raw then
-- PARSE
end
-- STATE
if fail then
  return redis.error_reply(fail)
end
if raw then
-- KEEP
end
-- STEP
