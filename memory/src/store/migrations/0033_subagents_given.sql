-- 33: whose words a subagent's task is, and where in the session it came
-- from it was given. At an owner change the task session is read by the
-- bot's new owner from the change on unless the task is theirs to read
-- (`Writer::floor_task_of_unread_origin`): they gave it (`given_by`, the
-- owner of the session it came from when it was given), or they read the
-- part of that session where it was given (`given_seq`, the newest seq
-- there when it was given, at or past the session's floor for them). A
-- task a routine its former owner made through the API gave was read by
-- the new owner whole, the routine's session going to them read from the
-- change on. NULL on older rows: such a task is judged by the session's
-- owner alone, as before.
ALTER TABLE subagents ADD COLUMN given_by TEXT;
ALTER TABLE subagents ADD COLUMN given_seq INTEGER;
