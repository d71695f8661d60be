/**
 * Where the CLI connects and with which key: flags first, then the environment, then defaults.
 */
import { UsageError } from './command.js';

/** The gateway's address when neither `--address` nor `SLUICE_ADDRESS` says otherwise. */
export const DEFAULT_ADDRESS = '127.0.0.1:50051';

/** Environment variables the CLI reads. */
export const ENV_ADDRESS = 'SLUICE_ADDRESS';
export const ENV_API_KEY = 'SLUICE_API_KEY';

/** What a client needs. */
export interface ConnectionConfig {
  /** `host:port` of the gateway. */
  readonly address: string;
  /** The API key (a tenant's, or an admin key for `tenants` and `keys`). */
  readonly apiKey: string;
}

/** The command line's say on the connection. */
export interface ConnectionFlags {
  readonly address?: string | undefined;
  readonly apiKey?: string | undefined;
}

/** An empty or blank value counts as not given, so `SLUICE_API_KEY= sluice …` is refused too. */
function given(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed === undefined || trimmed === '' ? undefined : trimmed;
}

/**
 * Resolves the connection from flags and environment.
 *
 * @throws UsageError when no API key is given (there is no default key).
 */
export function resolveConnection(
  flags: ConnectionFlags,
  env: Readonly<Record<string, string | undefined>>,
): ConnectionConfig {
  const apiKey = given(flags.apiKey) ?? given(env[ENV_API_KEY]);
  if (apiKey === undefined) {
    throw new UsageError(
      `no API key: pass --api-key <key> or set ${ENV_API_KEY} (create one with npm run tenant:create)`,
    );
  }
  const flag = given(flags.address);
  const address = flag ?? given(env[ENV_ADDRESS]);
  if (address !== undefined) checkAddress(address, flag === undefined ? ENV_ADDRESS : '--address');
  return { address: address ?? DEFAULT_ADDRESS, apiKey };
}

/**
 * Refuses an address that would reach something else than the gateway meant: grpc-js connects to
 * port 443 when the address has no port, and takes `http://gw:50051` for a host name.
 *
 * @param source where the address came from (`--address`, `SLUICE_ADDRESS`), for the message
 */
function checkAddress(address: string, source: string): void {
  if (/^https?:\/\//i.test(address)) {
    throw new UsageError(`${source} is host:port, without http:// (got "${address}")`);
  }
  if (!/:\d+$/.test(address)) {
    throw new UsageError(
      `${source} needs a port: host:port such as ${DEFAULT_ADDRESS} (got "${address}")`,
    );
  }
}
