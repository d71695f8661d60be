-- Wakes the event relay as soon as task events commit: NOTIFY is delivered on commit, once per
-- transaction for identical payloads, so a batch of events costs one notification.
CREATE OR REPLACE FUNCTION sluice_notify_task_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('sluice_task_events', '');
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER task_events_notify AFTER INSERT ON task_events
  FOR EACH STATEMENT EXECUTE FUNCTION sluice_notify_task_events();
