CREATE TABLE "idempotency_tombstones" (
	"tenant_id" text NOT NULL,
	"idempotency_key" text NOT NULL,
	"task_id" uuid NOT NULL,
	"type" text NOT NULL,
	"type_version" integer NOT NULL,
	"priority" smallint NOT NULL,
	"input_hash" text NOT NULL,
	"status" text NOT NULL,
	"task_created_at" timestamp (3) with time zone NOT NULL,
	"finished_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "idempotency_tombstones_tenant_id_idempotency_key_pk" PRIMARY KEY("tenant_id","idempotency_key")
);
--> statement-breakpoint
CREATE INDEX "idempotency_tombstones_expires_idx" ON "idempotency_tombstones" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "task_timers_task_idx" ON "task_timers" USING btree ("task_id");--> statement-breakpoint
CREATE INDEX "tasks_finished_idx" ON "tasks" USING btree ("finished_at","id") WHERE "tasks"."status" in ('succeeded', 'failed_terminal', 'cancelled');