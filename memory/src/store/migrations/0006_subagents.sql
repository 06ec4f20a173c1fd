-- 6: subagents (child bots a bot delegated a task to) and their status
CREATE TABLE subagents (
    id             TEXT PRIMARY KEY,   -- the child bot's id
    parent         TEXT NOT NULL,      -- the delegating bot
    parent_session TEXT NOT NULL,      -- where its reports go
    description    TEXT NOT NULL,
    status         TEXT NOT NULL,      -- running | done | failed | stopped
    result         TEXT,               -- last report or error
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE INDEX subagents_parent ON subagents(parent, created_at);
