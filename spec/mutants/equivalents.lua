-- Generated mutants (spec/mutants/random.lua) shown to be equivalent: no
-- test can tell them from the code, for the reason given. Each is named by
-- its file, the exact text of the line and the line that replaces it (""
-- for a line deleted); the generator skips them. A change to the line makes
-- its entry stale (the mutant is then a new one, judged afresh).
return {
}
