-- 32: a subagent's task title and last report as they were before a
-- start withheld them from its bot's new owner (the task was given in a
-- conversation that stays its former owner's: `fleet_withheld.rs`), kept
-- so that a start after the bot was given back shows them again. NULL
-- while they are not withheld.
ALTER TABLE subagents ADD COLUMN withheld_description TEXT;
ALTER TABLE subagents ADD COLUMN withheld_result TEXT;
-- the withheld ones, for a start to find those to show again without
-- reading every subagent a fleet kept
CREATE INDEX subagents_withheld ON subagents(id) WHERE withheld_description IS NOT NULL;
