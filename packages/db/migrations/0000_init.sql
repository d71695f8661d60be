CREATE TABLE "api_keys" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" text NOT NULL,
	"key_hash" text NOT NULL,
	"key_prefix" text NOT NULL,
	"is_admin" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "leader_epochs" (
	"role" text PRIMARY KEY NOT NULL,
	"epoch" bigint NOT NULL,
	"holder" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "task_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"task_id" uuid NOT NULL,
	"tenant_id" text NOT NULL,
	"seq" integer NOT NULL,
	"type" text NOT NULL,
	"from_status" text,
	"to_status" text,
	"step" text,
	"data" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"published_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "task_steps" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"task_id" uuid NOT NULL,
	"seq" integer NOT NULL,
	"name" text NOT NULL,
	"resource" text NOT NULL,
	"tenant_id" text NOT NULL,
	"priority" smallint NOT NULL,
	"status" text NOT NULL,
	"input" jsonb NOT NULL,
	"task_attempt" integer DEFAULT 1 NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"dispatch_count" integer DEFAULT 0 NOT NULL,
	"due_at" timestamp with time zone DEFAULT now() NOT NULL,
	"dispatched_at" timestamp with time zone,
	"publish_seq" bigint,
	"started_at" timestamp with time zone,
	"heartbeat_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	"outcome" jsonb,
	"outcome_applied_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "task_steps_priority_ck" CHECK ("task_steps"."priority" between 0 and 3)
);
--> statement-breakpoint
CREATE TABLE "task_types" (
	"name" text NOT NULL,
	"version" integer NOT NULL,
	"input_schema" jsonb NOT NULL,
	"first_step" text NOT NULL,
	"steps" jsonb NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"registered_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "task_types_name_version_pk" PRIMARY KEY("name","version")
);
--> statement-breakpoint
CREATE TABLE "tasks" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" text NOT NULL,
	"type" text NOT NULL,
	"type_version" integer NOT NULL,
	"priority" smallint NOT NULL,
	"input" jsonb NOT NULL,
	"input_hash" text NOT NULL,
	"idempotency_key" text,
	"status" text NOT NULL,
	"cancel_requested" boolean DEFAULT false NOT NULL,
	"pause_requested" boolean DEFAULT false NOT NULL,
	"approval_pending" boolean DEFAULT false NOT NULL,
	"current_step" text,
	"attempt" integer DEFAULT 1 NOT NULL,
	"version" integer DEFAULT 1 NOT NULL,
	"last_event_seq" integer DEFAULT 0 NOT NULL,
	"error" jsonb,
	"output" jsonb,
	"trace_id" text,
	"trace_parent" text,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tasks_priority_ck" CHECK ("tasks"."priority" between 0 and 3)
);
--> statement-breakpoint
CREATE TABLE "tenants" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "task_events" ADD CONSTRAINT "task_events_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "public"."tasks"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "task_steps" ADD CONSTRAINT "task_steps_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "public"."tasks"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "api_keys_key_hash_uq" ON "api_keys" USING btree ("key_hash");--> statement-breakpoint
CREATE UNIQUE INDEX "task_events_task_seq_uq" ON "task_events" USING btree ("task_id","seq");--> statement-breakpoint
CREATE INDEX "task_events_unpublished_idx" ON "task_events" USING btree ("id") WHERE "task_events"."published_at" is null;--> statement-breakpoint
CREATE UNIQUE INDEX "task_steps_task_seq_uq" ON "task_steps" USING btree ("task_id","seq");--> statement-breakpoint
CREATE INDEX "task_steps_ready_idx" ON "task_steps" USING btree ("priority","due_at","id") WHERE "task_steps"."status" = 'ready';--> statement-breakpoint
CREATE INDEX "task_steps_unapplied_idx" ON "task_steps" USING btree ("id") WHERE "task_steps"."outcome" is not null and "task_steps"."outcome_applied_at" is null;--> statement-breakpoint
CREATE UNIQUE INDEX "tasks_tenant_idempotency_uq" ON "tasks" USING btree ("tenant_id","idempotency_key") WHERE "tasks"."idempotency_key" is not null;--> statement-breakpoint
CREATE INDEX "tasks_tenant_created_idx" ON "tasks" USING btree ("tenant_id","created_at","id");