CREATE TABLE "dead_letters" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"task_id" uuid NOT NULL,
	"tenant_id" text NOT NULL,
	"step" text NOT NULL,
	"step_seq" integer NOT NULL,
	"reason" text NOT NULL,
	"error" jsonb NOT NULL,
	"attempts" integer NOT NULL,
	"stream_seq" bigint,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"redriven_at" timestamp with time zone,
	CONSTRAINT "dead_letters_reason_ck" CHECK ("dead_letters"."reason" in ('attempts_exhausted', 'max_deliveries', 'terminated'))
);
--> statement-breakpoint
ALTER TABLE "dead_letters" ADD CONSTRAINT "dead_letters_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "public"."tasks"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "dead_letters_created_idx" ON "dead_letters" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "dead_letters_tenant_created_idx" ON "dead_letters" USING btree ("tenant_id","created_at","id");--> statement-breakpoint
CREATE INDEX "dead_letters_task_idx" ON "dead_letters" USING btree ("task_id");