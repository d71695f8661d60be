/**
 * Validation of names that become NATS subject tokens, consumer names or KV keys.
 *
 * Tenant ids, task type names and resource names travel into subjects such as
 * `sluice.step.<resource>.p<N>` and `sluice.events.<tenant>.<task>`. NATS forbids `.`, `*`, `>` and
 * whitespace in a token, and stream/consumer names also end up as file names on the server, so we
 * accept only a small, safe alphabet and validate at the edge (gateway, executor registration,
 * configuration) rather than escaping later.
 */

/** Longest accepted tenant id, task type name or resource name. */
export const MAX_NAME_LENGTH = 64;

const TENANT_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const TASK_TYPE = /^[a-z][a-z0-9_-]{0,63}$/;
/** `llm`, `browser`, `file`, `db`, or a kind with a name: `tool:http`, `mcp:search`. */
const RESOURCE = /^[a-z][a-z0-9_-]{0,30}(:[a-z0-9][a-z0-9_-]{0,31})?$/;
const STEP_NAME = /^[a-z][a-zA-Z0-9_-]{0,63}$/;
const PREFIX = /^[a-z][a-z0-9_]{0,31}$/;

/** Why a name was refused; `undefined` when it is acceptable. */
export type NameProblem = string | undefined;

function check(kind: string, value: unknown, pattern: RegExp, alphabet: string): NameProblem {
  if (typeof value !== 'string' || value.length === 0) return `${kind} is required`;
  if (!pattern.test(value)) return `${kind} "${truncate(value)}" must match ${alphabet}`;
  return undefined;
}

function truncate(value: string): string {
  return value.length > 40 ? `${value.slice(0, 40)}…` : value;
}

/** Tenant ids: lower-case letters, digits, `_` and `-`, starting with a letter or digit, ≤ 64. */
export function tenantIdProblem(value: unknown): NameProblem {
  return check('tenant id', value, TENANT_ID, '[a-z0-9][a-z0-9_-]{0,63}');
}

/** Task type names: lower-case letters, digits, `_` and `-`, starting with a letter, ≤ 64. */
export function taskTypeProblem(value: unknown): NameProblem {
  return check('task type', value, TASK_TYPE, '[a-z][a-z0-9_-]{0,63}');
}

/** Resource names: `kind` or `kind:name`, each part lower-case letters, digits, `_`, `-`. */
export function resourceProblem(value: unknown): NameProblem {
  const problem = check('resource', value, RESOURCE, 'kind or kind:name in [a-z0-9_-]');
  if (problem) return problem;
  // `:` becomes `__` in stream and consumer names (resourceFileToken), so `tool:x` and `tool__x`
  // would share a consumer: a double underscore is reserved for that mapping.
  if ((value as string).includes('__'))
    return `resource "${value as string}" must not contain "__"`;
  return undefined;
}

/** Step names within a task type: a letter, then letters, digits, `_` or `-`, ≤ 64. */
export function stepNameProblem(value: unknown): NameProblem {
  return check('step name', value, STEP_NAME, '[a-z][a-zA-Z0-9_-]{0,63}');
}

/** The prefix of every subject, stream, consumer and bucket of one deployment (or one test run). */
export function prefixProblem(value: unknown): NameProblem {
  return check('prefix', value, PREFIX, '[a-z][a-z0-9_]{0,31}');
}

/**
 * A resource name as it may appear inside a stream, consumer or bucket name, which NATS stores as a
 * file name: the `:` of `tool:http` becomes `__`. Call only with a validated resource name.
 */
export function resourceFileToken(resource: string): string {
  return resource.replace(':', '__');
}
