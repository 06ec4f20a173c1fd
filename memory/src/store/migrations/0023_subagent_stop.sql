-- 23: how a subagent was stopped (StopSubagent), written with the stop: the
-- call that stopped it, the state it was in and since when, how many of its
-- approvals the stop expired. JSON (`SubagentStop`); NULL for one never
-- stopped, or stopped before this column.
ALTER TABLE subagents ADD COLUMN stop TEXT;
