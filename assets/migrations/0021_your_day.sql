-- The daily and weekly recap (issue 58) is kept as a summary: observations.kind
-- gains 'recap_day' and 'recap_week' (period: local midnight to the next, or
-- Monday to Monday), and 'meeting' for a meeting's note (period: the call).
-- Only a CHECK constraint widens, so the definition is edited in place, as in
-- 0012; the runner bumps the schema cookie afterwards.
PRAGMA writable_schema = ON;
UPDATE sqlite_master
   SET sql = replace(sql, '''activity'', ''conversation'')', '''activity'', ''conversation'', ''recap_day'', ''recap_week'', ''meeting'')')
 WHERE type = 'table' AND name = 'observations';
PRAGMA writable_schema = OFF;

-- Every notification says why it appeared ("Why: …"), shown under its body on
-- the desktop and in the inbox.
ALTER TABLE notifications ADD COLUMN why TEXT NOT NULL DEFAULT '';
