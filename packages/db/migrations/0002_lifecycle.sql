CREATE TABLE "task_timers" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"task_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"due_at" timestamp with time zone NOT NULL,
	"data" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"done_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "task_steps" ADD COLUMN "fan_out_of" integer;--> statement-breakpoint
ALTER TABLE "task_steps" ADD COLUMN "branch_index" integer;--> statement-breakpoint
ALTER TABLE "task_steps" ADD COLUMN "join_of" integer;--> statement-breakpoint
ALTER TABLE "task_steps" ADD COLUMN "key_seq" integer;--> statement-breakpoint
ALTER TABLE "task_steps" ADD COLUMN "superseded" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "progress" double precision DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "progress_message" text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "approval" jsonb;--> statement-breakpoint
ALTER TABLE "task_timers" ADD CONSTRAINT "task_timers_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "public"."tasks"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "task_timers_due_idx" ON "task_timers" USING btree ("due_at","id") WHERE "task_timers"."done_at" is null;--> statement-breakpoint
CREATE INDEX "task_steps_dispatched_idx" ON "task_steps" USING btree ("priority","dispatched_at");