/**
 * The credentials an end-to-end test file hands out, and the check that none of them reaches a
 * service's output (issue 6: "no API key appears in any log output of the suite").
 *
 * The e2e support registers every key it creates or passes (the tenant key, the LLM key, a
 * database password); tests register the ones they make themselves with {@link registerSecret}.
 * Whatever the registry misses, a Sluice API key is still recognized by its shape (`slk_` and its
 * random part), so an admin key a test made with `createApiKey` directly is covered too. Every
 * {@link ServiceProcess} runs {@link findSecretLeaks} on its output when it is stopped.
 *
 * The registry is per process: `node --test` runs each test file in a process of its own.
 */

/** A credential the run knows about, and what to call it in a failure message. */
export interface RegisteredSecret {
  readonly value: string;
  readonly label: string;
}

/** One line of output that holds a secret. */
export interface SecretLeak {
  /** What the secret is (`tenant API key`, `LLM API key`, `Sluice API key (by shape)` …). */
  readonly label: string;
  /** `stdout` or `stderr`, and the line's 1-based number there. */
  readonly stream: 'stdout' | 'stderr';
  readonly lineNumber: number;
  /** The line with every known secret masked (safe to print). */
  readonly maskedLine: string;
}

/**
 * A Sluice API key (`slk_` and 32 base64url characters) or one near it (a wrong key a test sent).
 * The 10-character `key_prefix` the gateway logs on purpose is shorter than this.
 */
const API_KEY_SHAPE = /(?<![A-Za-z0-9_-])slk_[A-Za-z0-9_-]{16,}/g;

/**
 * Environment variables whose values are credentials, by name: keys, secrets, tokens, passwords,
 * and header lists (`OTEL_EXPORTER_OTLP_HEADERS` carries an exporter's authorization).
 */
export const SECRET_VARIABLE = /(API_KEY|SECRET|TOKEN|PASSWORD|HEADERS)$/;

const secrets = new Map<string, RegisteredSecret>();

/**
 * Records a credential no service may ever print. Empty values are ignored; registering a value
 * again keeps its first label.
 */
export function registerSecret(value: string | undefined, label: string): void {
  if (value === undefined || value.length === 0 || secrets.has(value)) return;
  secrets.set(value, { value, label });
}

/** Every credential registered so far in this process. */
export function registeredSecrets(): readonly RegisteredSecret[] {
  return [...secrets.values()];
}

/** Registers the password of a URL such as `DATABASE_URL`, when it has one. */
export function registerUrlPassword(url: string, label: string): void {
  try {
    const password = new URL(url).password;
    if (password !== '') registerSecret(decodeURIComponent(password), label);
  } catch {
    // Not a URL: nothing to register.
  }
}

/**
 * The places `secret` occurs in `text` as a whole token (not inside a longer word), so that a
 * short key such as `sk-trace` is not found inside `task-trace`.
 */
function occursIn(text: string, secret: string): boolean {
  const isTokenChar = (c: string | undefined) => c !== undefined && /[A-Za-z0-9_-]/.test(c);
  for (let at = text.indexOf(secret); at !== -1; at = text.indexOf(secret, at + 1)) {
    if (!isTokenChar(text[at - 1]) && !isTokenChar(text[at + secret.length])) return true;
  }
  return false;
}

/** `slk_abc…(36 chars)`: enough to tell which secret, never the secret. */
export function maskSecret(secret: string): string {
  return `${secret.slice(0, Math.min(4, Math.floor(secret.length / 3)))}…(${secret.length} chars)`;
}

/** `text` with every registered secret and every key-shaped string masked. */
export function maskSecrets(text: string): string {
  let masked = text;
  // Longest first, so that a secret containing another is masked whole.
  const values = [...secrets.keys()].sort((a, b) => b.length - a.length);
  for (const value of values) masked = masked.split(value).join(maskSecret(value));
  return masked.replace(API_KEY_SHAPE, (key) => maskSecret(key));
}

/**
 * The lines of a process's output that hold a registered secret or an API key by its shape, the
 * first secret found per line.
 */
export function findSecretLeaks(output: {
  readonly stdout: readonly string[];
  readonly stderr: readonly string[];
}): SecretLeak[] {
  const leaks: SecretLeak[] = [];
  const known = registeredSecrets();
  for (const stream of ['stdout', 'stderr'] as const) {
    output[stream].forEach((line, index) => {
      const found =
        known.find((secret) => occursIn(line, secret.value))?.label ??
        (new RegExp(API_KEY_SHAPE.source).test(line) ? 'Sluice API key (by shape)' : undefined);
      if (found !== undefined) {
        leaks.push({
          label: found,
          stream,
          lineNumber: index + 1,
          maskedLine: maskSecrets(line),
        });
      }
    });
  }
  return leaks;
}

/** Thrown when a service printed a secret; the message names the service and the lines, masked. */
export class SecretLeakError extends Error {
  override readonly name = 'SecretLeakError';
  constructor(
    readonly service: string,
    readonly leaks: readonly SecretLeak[],
  ) {
    const shown = leaks
      .slice(0, 5)
      .map((leak) => `  ${leak.stream}:${leak.lineNumber} (${leak.label}): ${leak.maskedLine}`);
    const more = leaks.length > 5 ? [`  … and ${leaks.length - 5} more lines`] : [];
    super(
      `${service} printed a secret in ${leaks.length} line(s) of its output:\n` +
        [...shown, ...more].join('\n'),
    );
  }
}
