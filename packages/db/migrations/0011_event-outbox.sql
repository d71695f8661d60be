-- The relay publishes from an outbox of event ids instead of marking each event published: a mark
-- rewrote the whole event row and its indexes, since published_at was in the unpublished index's
-- predicate (decisions.md, "The relay publishes from an outbox of event ids").
CREATE TABLE "task_event_outbox" (
	"event_id" bigint PRIMARY KEY NOT NULL
);
--> statement-breakpoint
-- Events not published yet when this runs go on waiting for the relay, now in the outbox.
INSERT INTO "task_event_outbox" ("event_id")
	SELECT "id" FROM "task_events" WHERE "published_at" IS NULL;--> statement-breakpoint
DROP INDEX "task_events_unpublished_idx";--> statement-breakpoint
ALTER TABLE "task_events" DROP COLUMN "published_at";
