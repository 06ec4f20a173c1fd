-- 25: the running subagents of a parent, without reading its finished
-- ones. Task, MessageSubagent and the writer's `runtime.max_subagents`
-- check count them at each call, and CheckSubagent lists them; a parent
-- that delegated for months has thousands of finished ones, each with
-- its report (`subagents_running_of`, reader_bots.rs).
CREATE INDEX subagents_running ON subagents(parent, created_at) WHERE status = 'running';
