--- hwtimer: a hashed timing wheel timer for Lua.
-- The wheel, its worker thread and the wake-up pipe live in C (hwtimer.core);
-- this module is the public face and the home of helpers better written in Lua.
local core = require("hwtimer.core")

local hwtimer = {
  _VERSION = core._VERSION,
  now = core.now,
  new = core.new,
}

--- hwtimer.retry(timer, fn, [opts]): call fn(attempt) on the timer's loop
-- until it succeeds, with exponential backoff (lua/hwtimer/retry.lua).
hwtimer.retry = require("hwtimer.retry").retry

return hwtimer
