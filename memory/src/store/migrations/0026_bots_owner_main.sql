-- 26: an owner's bots other than subagents (origin not `subagent:`), by
-- id, without reading its subagents' records. Each Task makes a bot
-- record of its own, so an owner whose bots delegated for months has
-- thousands; the bot list (`GET /v1/bots`: its subagents read by parent,
-- the latest few finished ones of each), CreateAgent's
-- `runtime.max_created_agents` count, SendToAgent's list of likely meant
-- agents and the right to forget a project's note read these bots only
-- (`main_bots_of`, reader_bots.rs). Task writes a subagent's record once,
-- so the index costs nothing per turn.
CREATE INDEX bots_owner_main ON bots(owner, id) WHERE substr(origin, 1, 9) <> 'subagent:';
