CREATE TABLE "resource_limits" (
	"resource" text PRIMARY KEY NOT NULL,
	"max_in_flight" integer NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "resource_limits_max_ck" CHECK ("resource_limits"."max_in_flight" >= 0)
);
--> statement-breakpoint
CREATE TABLE "tenant_limits" (
	"tenant_id" text NOT NULL,
	"resource" text NOT NULL,
	"floor" integer DEFAULT 0 NOT NULL,
	"cap" integer,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tenant_limits_tenant_id_resource_pk" PRIMARY KEY("tenant_id","resource"),
	CONSTRAINT "tenant_limits_floor_ck" CHECK ("tenant_limits"."floor" >= 0),
	CONSTRAINT "tenant_limits_cap_ck" CHECK ("tenant_limits"."cap" is null or "tenant_limits"."cap" >= "tenant_limits"."floor")
);
--> statement-breakpoint
CREATE INDEX "task_steps_ready_group_idx" ON "task_steps" USING btree ("resource","tenant_id","priority","due_at","id") WHERE "task_steps"."status" = 'ready';--> statement-breakpoint
CREATE INDEX "task_steps_in_flight_resource_idx" ON "task_steps" USING btree ("resource","tenant_id") WHERE "task_steps"."status" in ('dispatched', 'running');