-- 2: group rooms, routines, subagent delegations (issue 4)
-- (reserved; filled in by the feature)
SELECT 1;
