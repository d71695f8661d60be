DROP INDEX "task_steps_dispatched_idx";--> statement-breakpoint
CREATE INDEX "task_steps_activity_idx" ON "task_steps" USING btree ("priority",greatest("dispatched_at", "started_at", "finished_at"));