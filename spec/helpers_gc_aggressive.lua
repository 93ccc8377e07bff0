-- busted --helper for `make check`'s valgrind run: a collector that never
-- rests (a new cycle as soon as one ends) and works hard on every step, so
-- that objects are freed, and finalizers run, between almost any two operations.
if _VERSION == "Lua 5.1" or rawget(_G, "jit") then
  collectgarbage("setpause", 100)
  collectgarbage("setstepmul", 1000)
else
  collectgarbage("setpause", 100)
  collectgarbage("setstepmul", 1000)
end
-- (this helper replaces .busted's: each test's time limit comes with it)
dofile("spec/watchdog.lua")
