CREATE TABLE "breaker_transitions" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"resource" text NOT NULL,
	"from_status" text NOT NULL,
	"to_status" text NOT NULL,
	"reason" text NOT NULL,
	"epoch" bigint NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "breaker_transitions_status_ck" CHECK ("breaker_transitions"."from_status" in ('closed', 'open', 'half_open') and "breaker_transitions"."to_status" in ('closed', 'open', 'half_open'))
);
--> statement-breakpoint
CREATE TABLE "breakers" (
	"resource" text PRIMARY KEY NOT NULL,
	"status" text NOT NULL,
	"state" jsonb NOT NULL,
	"cool_down_until" timestamp with time zone,
	"epoch" bigint NOT NULL,
	"changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "breakers_status_ck" CHECK ("breakers"."status" in ('closed', 'open', 'half_open'))
);
--> statement-breakpoint
CREATE TABLE "governor_overrides" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"target" text NOT NULL,
	"value" text NOT NULL,
	"reason" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone,
	"cleared_at" timestamp with time zone,
	CONSTRAINT "governor_overrides_kind_ck" CHECK ("governor_overrides"."kind" in ('breaker', 'priority', 'limit')),
	CONSTRAINT "governor_overrides_value_ck" CHECK (("governor_overrides"."kind" = 'breaker' and "governor_overrides"."value" in ('open', 'closed'))
        or ("governor_overrides"."kind" = 'priority' and "governor_overrides"."target" in ('0', '1', '2', '3') and "governor_overrides"."value" in ('hold', 'release'))
        or ("governor_overrides"."kind" = 'limit' and "governor_overrides"."value" ~ '^[1-9][0-9]{0,8}$')),
	CONSTRAINT "governor_overrides_target_ck" CHECK (length("governor_overrides"."target") > 0),
	CONSTRAINT "governor_overrides_reason_ck" CHECK (length(btrim("governor_overrides"."reason")) > 0),
	CONSTRAINT "governor_overrides_expires_ck" CHECK ("governor_overrides"."expires_at" is null or "governor_overrides"."expires_at" > "governor_overrides"."created_at")
);
--> statement-breakpoint
CREATE INDEX "breaker_transitions_resource_at_idx" ON "breaker_transitions" USING btree ("resource","at");--> statement-breakpoint
CREATE INDEX "breakers_cool_down_idx" ON "breakers" USING btree ("cool_down_until") WHERE "breakers"."status" = 'open';--> statement-breakpoint
CREATE UNIQUE INDEX "governor_overrides_uncleared_uq" ON "governor_overrides" USING btree ("kind","target") WHERE "governor_overrides"."cleared_at" is null;