/**
 * The business handlers of `sluice.v1.AdminService`: tenants, their API keys, and dead letters;
 * the backpressure RPCs are in `pressure.ts`.
 *
 * Every call first proves the caller holds an admin key (`admin-auth.ts`), then validates the
 * request, then makes one write at most, so a refused call changes nothing (a redrive writes
 * once per letter: one transaction each). Secrets are returned
 * once by `CreateApiKey` and never logged: log lines name keys by id and prefix.
 */
import { SluiceErrorCode, isSluiceError, tenantIdProblem } from '@sluice/core';
import {
  createTenant,
  findTenant,
  isUuid,
  issueApiKey,
  listApiKeys,
  listDeadLetters,
  listTenants,
  purgeDeadLetters,
  revokeApiKey,
  type Database,
} from '@sluice/db';
import type { GovernorBucketReader, GuardCapsView } from '@sluice/bus';
import type { Logger } from '@sluice/telemetry';
import { alreadyExists, failedPrecondition, invalidArgument, notFound } from '../grpc/index.js';
import type { AdminServiceHandlers } from '../grpc/admin-service.js';
import { authenticateAdmin } from './admin-auth.js';
import { decodeDeadLetterPageToken, encodeDeadLetterPageToken } from './dead-letter-page-token.js';
import { describeDeadLetter, redriveDeadLetter } from './dead-letters.js';
import { apiKeyToApi, tenantToApi } from './mapping.js';
import { createPressureHandlers } from './pressure.js';
import { decodeTenantPageToken, encodeTenantPageToken } from './tenant-page-token.js';

/** What the handlers need. */
export interface AdminServiceDeps {
  readonly db: Database;
  readonly log: Logger;
  /** Tells the scheduler it has work (after a redrive queued steps). */
  readonly wakeScheduler: () => void;
  /** The governor bucket (opened, not created: it may not exist yet), read by `GetPressure`. */
  readonly governorKv: GovernorBucketReader;
  /** Age after which `GetPressure` calls the governor's decision stale (default 10 s). */
  readonly decisionStaleMs?: number;
  /** The schedulers' urgent-wait guard caps, which `GetPressure` lists. */
  readonly guardCaps?: GuardCapsView;
}

/** Longest accepted display name, in characters (code points). */
export const MAX_DISPLAY_NAME_LENGTH = 200;
/** Page size of `ListTenants` when the caller gives none. */
export const DEFAULT_TENANT_PAGE_SIZE = 100;
/** The most tenants one `ListTenants` page holds; larger requests are lowered to it. */
export const MAX_TENANT_PAGE_SIZE = 1_000;
/** Page size of `ListDeadLetters` when the caller gives none. */
export const DEFAULT_DEAD_LETTER_PAGE_SIZE = 50;
/** The most letters one `ListDeadLetters` page holds; larger requests are lowered to it. */
export const MAX_DEAD_LETTER_PAGE_SIZE = 500;
/** The most ids one `RedriveDeadLetters` or `PurgeDeadLetters` call may name. */
export const MAX_DEAD_LETTER_IDS = 100;

/** Creates the AdminService handlers. */
export function createAdminService(deps: AdminServiceDeps): AdminServiceHandlers {
  const { db, log } = deps;

  return {
    ...createPressureHandlers({
      db,
      log,
      governorKv: deps.governorKv,
      ...(deps.decisionStaleMs === undefined ? {} : { decisionStaleMs: deps.decisionStaleMs }),
      ...(deps.guardCaps === undefined ? {} : { guardCaps: deps.guardCaps }),
    }),

    async CreateTenant(call) {
      const caller = await authenticateAdmin(db, call.metadata);
      const { tenant_id: tenantId, display_name: displayName } = call.request;
      checkTenantId(tenantId);
      const nameProblem = displayNameProblem(displayName);
      if (nameProblem) throw invalidArgument('display_name', nameProblem);
      let tenant;
      try {
        tenant = await createTenant(db, {
          id: tenantId,
          ...(displayName === '' ? {} : { name: displayName }),
        });
      } catch (error) {
        if (isSluiceError(error, SluiceErrorCode.AlreadyExists)) {
          throw alreadyExists(`tenant ${tenantId} already exists`);
        }
        throw error;
      }
      log.info({ tenant_id: tenantId, by_tenant: caller.tenantId }, 'tenant created');
      return { tenant: tenantToApi(tenant) };
    },

    async ListTenants(call) {
      await authenticateAdmin(db, call.metadata);
      const { page_size: pageSize, page_token: pageToken } = call.request;
      if (pageSize < 0) throw invalidArgument('page_size', 'page_size must not be negative');
      const limit =
        pageSize === 0 ? DEFAULT_TENANT_PAGE_SIZE : Math.min(pageSize, MAX_TENANT_PAGE_SIZE);
      const after = pageToken === '' ? undefined : decodeTenantPageToken(pageToken);
      if (after === null) {
        throw invalidArgument('page_token', 'page_token is not one ListTenants issued');
      }
      // One row more than the page tells whether another page follows.
      const rows = await listTenants(db, { limit: limit + 1, ...(after ? { after } : {}) });
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      return {
        tenants: page.map(tenantToApi),
        next_page_token: rows.length > limit && last ? encodeTenantPageToken(last.id) : '',
      };
    },

    async CreateApiKey(call) {
      const caller = await authenticateAdmin(db, call.metadata);
      const { tenant_id: tenantId, admin } = call.request;
      checkTenantId(tenantId);
      const issued = await issueApiKey(db, { tenantId, isAdmin: admin });
      if (issued === 'tenant_not_found') throw notFound(`tenant ${tenantId} not found`);
      const { key, secret } = issued;
      log.info(
        {
          key_id: key.id,
          key_prefix: key.keyPrefix,
          tenant_id: tenantId,
          admin,
          by_tenant: caller.tenantId,
        },
        'API key created',
      );
      return { key: apiKeyToApi(key), secret };
    },

    async ListApiKeys(call) {
      await authenticateAdmin(db, call.metadata);
      const { tenant_id: tenantId } = call.request;
      checkTenantId(tenantId);
      if (!(await findTenant(db, tenantId))) throw notFound(`tenant ${tenantId} not found`);
      const keys = await listApiKeys(db, tenantId);
      return { keys: keys.map(apiKeyToApi) };
    },

    async RevokeApiKey(call) {
      const caller = await authenticateAdmin(db, call.metadata);
      const { key_id: keyId } = call.request;
      if (keyId === '') throw invalidArgument('key_id', 'key_id is required');
      if (!isUuid(keyId)) throw invalidArgument('key_id', 'key_id must be a UUID');
      const revoked = await revokeApiKey(db, keyId);
      if (revoked === 'not_found') throw notFound(`API key ${keyId} not found`);
      if (revoked === 'already_revoked') {
        throw failedPrecondition(`API key ${keyId} is already revoked`);
      }
      log.info(
        {
          key_id: revoked.id,
          key_prefix: revoked.keyPrefix,
          tenant_id: revoked.tenantId,
          by_tenant: caller.tenantId,
        },
        'API key revoked',
      );
      return { key: apiKeyToApi(revoked) };
    },

    async ListDeadLetters(call) {
      await authenticateAdmin(db, call.metadata);
      const { page_size: pageSize, page_token: pageToken, tenant_id: tenantId } = call.request;
      if (pageSize < 0) throw invalidArgument('page_size', 'page_size must not be negative');
      if (tenantId !== '') checkTenantId(tenantId);
      const limit =
        pageSize === 0
          ? DEFAULT_DEAD_LETTER_PAGE_SIZE
          : Math.min(pageSize, MAX_DEAD_LETTER_PAGE_SIZE);
      const after = pageToken === '' ? undefined : decodeDeadLetterPageToken(pageToken, tenantId);
      if (after === null) {
        throw invalidArgument('page_token', 'page_token is not one ListDeadLetters issued');
      }
      // One row more than the page tells whether another page follows.
      const rows = await listDeadLetters(db, {
        limit: limit + 1,
        ...(after ? { after } : {}),
        ...(tenantId === '' ? {} : { tenantId }),
      });
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      const letters = [];
      for (const letter of page) letters.push(await describeDeadLetter(db, letter));
      return {
        dead_letters: letters,
        next_page_token:
          rows.length > limit && last ? encodeDeadLetterPageToken(last, tenantId) : '',
      };
    },

    async RedriveDeadLetters(call) {
      const caller = await authenticateAdmin(db, call.metadata);
      const ids = checkDeadLetterIds(call.request.dead_letter_ids);
      const results = [];
      let wake = false;
      try {
        for (const id of ids) {
          // Stored (and named in the retry's event) as Postgres prints it; answered as requested.
          const redrive = await redriveDeadLetter(db, id.toLowerCase());
          results.push({ ...redrive.result, dead_letter_id: id });
          wake ||= redrive.wakeScheduler;
        }
      } finally {
        // Letters redriven before a failure are committed: their steps must not wait for a poll.
        if (wake) deps.wakeScheduler();
      }
      log.info(
        {
          redriven: results.filter((r) => r.redriven).map((r) => r.dead_letter_id),
          refused: results.filter((r) => !r.redriven).length,
          by_tenant: caller.tenantId,
        },
        'dead letters redriven',
      );
      return { results };
    },

    async PurgeDeadLetters(call) {
      const caller = await authenticateAdmin(db, call.metadata);
      const ids = checkDeadLetterIds(call.request.dead_letter_ids);
      const purged = new Set(
        await purgeDeadLetters(
          db,
          ids.map((id) => id.toLowerCase()),
        ),
      );
      log.info({ purged: [...purged], by_tenant: caller.tenantId }, 'dead letters purged');
      // Named as requested, in request order (deleted by their stored, lower-case spelling), so a
      // caller finds its own ids in the answer, as a redrive's results name them.
      return { purged_ids: ids.filter((id) => purged.has(id.toLowerCase())) };
    },
  };
}

/**
 * The requested letter ids, each once (the first spelling of ids that differ in case only, so a
 * redrive's results name each as requested); `INVALID_ARGUMENT` unless 1 to 100 UUIDs.
 */
function checkDeadLetterIds(ids: readonly string[]): string[] {
  const field = 'dead_letter_ids';
  if (ids.length === 0) throw invalidArgument(field, 'dead_letter_ids must name a letter');
  if (ids.length > MAX_DEAD_LETTER_IDS) {
    throw invalidArgument(field, `dead_letter_ids may name at most ${MAX_DEAD_LETTER_IDS} letters`);
  }
  const bad = ids.find((id) => !isUuid(id));
  if (bad !== undefined) throw invalidArgument(field, `dead letter id ${bad} is not a UUID`);
  const distinct = new Map<string, string>();
  for (const id of ids) if (!distinct.has(id.toLowerCase())) distinct.set(id.toLowerCase(), id);
  return [...distinct.values()];
}

/** Throws `INVALID_ARGUMENT` naming `tenant_id` unless it is a well-formed tenant id. */
function checkTenantId(tenantId: string): void {
  const problem = tenantIdProblem(tenantId);
  if (problem) throw invalidArgument('tenant_id', problem);
}

/** Why a display name is refused; `undefined` when it is acceptable (`''` means "the id"). */
export function displayNameProblem(name: string): string | undefined {
  if ([...name].length > MAX_DISPLAY_NAME_LENGTH) {
    return `display_name must be at most ${MAX_DISPLAY_NAME_LENGTH} characters`;
  }
  if (/\p{Cc}/u.test(name)) return 'display_name must not contain control characters';
  return undefined;
}
