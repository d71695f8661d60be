/**
 * A real OTLP/HTTP trace endpoint on loopback, for tests: services export to it exactly as they
 * would to Jaeger or a collector (`OTEL_EXPORTER_OTLP_ENDPOINT=<endpoint>`), and the test reads
 * the spans that arrived and waits for the ones it expects.
 *
 * `POST /v1/traces` with `application/x-protobuf` (OTLP/HTTP binary, the `http/protobuf`
 * protocol) is decoded with protobufjs from the official OpenTelemetry definitions of
 * `ExportTraceServiceRequest` and what it contains, declared below with their packages, names and
 * field numbers; `application/json` (OTLP/HTTP JSON: camelCase names, hex ids, enums as numbers)
 * is read as well. A gzip `content-encoding` is accepted. A good request is answered 200 with an
 * empty `ExportTraceServiceResponse` (full success), a bad one 400 or 415, kept in
 * {@link OtlpReceiver.errors} so a test can check that nothing was malformed.
 *
 * Definitions: opentelemetry-proto v1.11.0 (commit 790608c4d51e6ffc12210b541e8514cbed9e91a4),
 * files opentelemetry/proto/collector/trace/v1/trace_service.proto, trace/v1/trace.proto,
 * common/v1/common.proto and resource/v1/resource.proto; unchanged since up to commit ac2c4b5 of
 * August 2026. Left out, as no trace exporter sends them: `AnyValue.string_value_strindex`,
 * `KeyValue.key_strindex` and `Resource.entity_refs` (profiles and entities, in development);
 * protobuf skips unknown fields, so a payload carrying them still decodes.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import protobuf from 'protobufjs';

/** A span attribute's value, as the exporter sent it (int64 as a number, bytes as base64). */
export type OtlpValue =
  string | number | boolean | null | readonly OtlpValue[] | { readonly [key: string]: OtlpValue };

/** Attributes by key. */
export type OtlpAttributes = Readonly<Record<string, OtlpValue>>;

/** `Span.SpanKind` without its prefix, lower case. */
export type OtlpSpanKind =
  'unspecified' | 'internal' | 'server' | 'client' | 'producer' | 'consumer';

/** `Status.StatusCode` without its prefix, lower case. */
export type OtlpStatusCode = 'unset' | 'ok' | 'error';

/** One span event. */
export interface OtlpEvent {
  readonly name: string;
  readonly timeUnixNano: bigint;
  readonly attributes: OtlpAttributes;
}

/** One span link. */
export interface OtlpLink {
  readonly traceId: string;
  readonly spanId: string;
  readonly attributes: OtlpAttributes;
}

/** A span as received, with what its resource and scope say about where it comes from. */
export interface ReceivedSpan {
  /** 32 lower-case hex digits. */
  readonly traceId: string;
  /** 16 lower-case hex digits. */
  readonly spanId: string;
  /** The parent's span id; `undefined` for a root span. */
  readonly parentSpanId: string | undefined;
  readonly name: string;
  readonly kind: OtlpSpanKind;
  /** The `service.name` resource attribute of the process that sent it. */
  readonly serviceName: string | undefined;
  readonly resource: OtlpAttributes;
  /** The instrumentation scope (tracer) name, e.g. `@sluice/executor`. */
  readonly scope: string;
  readonly startTimeUnixNano: bigint;
  readonly endTimeUnixNano: bigint;
  readonly attributes: OtlpAttributes;
  readonly events: readonly OtlpEvent[];
  readonly links: readonly OtlpLink[];
  readonly status: { readonly code: OtlpStatusCode; readonly message: string };
}

/** A running receiver. */
export interface OtlpReceiver {
  /** The base URL for `OTEL_EXPORTER_OTLP_ENDPOINT`, e.g. `http://127.0.0.1:41234`. */
  readonly endpoint: string;
  /** `${endpoint}/v1/traces`, for `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`. */
  readonly tracesUrl: string;
  /** Every span received so far, in arrival order. */
  readonly spans: readonly ReceivedSpan[];
  /** Export requests accepted so far. */
  readonly requests: number;
  /** What was wrong with each rejected request. */
  readonly errors: readonly string[];
  /**
   * Resolves with the spans received once `predicate` accepts them (checked now and after every
   * export request); rejects after `timeoutMs` (default 30 s), naming what did arrive.
   */
  waitFor(
    predicate: (spans: readonly ReceivedSpan[]) => boolean,
    timeoutMs?: number,
  ): Promise<readonly ReceivedSpan[]>;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** The OTLP/HTTP path of traces. */
export const TRACES_PATH = '/v1/traces';
/** Largest accepted request body (the SDK's batches are far smaller). */
const MAX_BODY_BYTES = 32 * 1024 * 1024;

const repeated = (type: string, id: number) => ({ rule: 'repeated', type, id });

const root = protobuf.Root.fromJSON({
  nested: {
    opentelemetry: {
      nested: {
        proto: {
          nested: {
            common: {
              nested: {
                v1: {
                  nested: {
                    AnyValue: {
                      oneofs: {
                        value: {
                          oneof: [
                            'string_value',
                            'bool_value',
                            'int_value',
                            'double_value',
                            'array_value',
                            'kvlist_value',
                            'bytes_value',
                          ],
                        },
                      },
                      fields: {
                        string_value: { type: 'string', id: 1 },
                        bool_value: { type: 'bool', id: 2 },
                        int_value: { type: 'int64', id: 3 },
                        double_value: { type: 'double', id: 4 },
                        array_value: { type: 'ArrayValue', id: 5 },
                        kvlist_value: { type: 'KeyValueList', id: 6 },
                        bytes_value: { type: 'bytes', id: 7 },
                      },
                    },
                    ArrayValue: { fields: { values: repeated('AnyValue', 1) } },
                    KeyValueList: { fields: { values: repeated('KeyValue', 1) } },
                    KeyValue: {
                      fields: {
                        key: { type: 'string', id: 1 },
                        value: { type: 'AnyValue', id: 2 },
                      },
                    },
                    InstrumentationScope: {
                      fields: {
                        name: { type: 'string', id: 1 },
                        version: { type: 'string', id: 2 },
                        attributes: repeated('KeyValue', 3),
                        dropped_attributes_count: { type: 'uint32', id: 4 },
                      },
                    },
                  },
                },
              },
            },
            resource: {
              nested: {
                v1: {
                  nested: {
                    Resource: {
                      fields: {
                        attributes: repeated('opentelemetry.proto.common.v1.KeyValue', 1),
                        dropped_attributes_count: { type: 'uint32', id: 2 },
                      },
                    },
                  },
                },
              },
            },
            trace: {
              nested: {
                v1: {
                  nested: {
                    ResourceSpans: {
                      fields: {
                        resource: { type: 'opentelemetry.proto.resource.v1.Resource', id: 1 },
                        scope_spans: repeated('ScopeSpans', 2),
                        schema_url: { type: 'string', id: 3 },
                      },
                    },
                    ScopeSpans: {
                      fields: {
                        scope: {
                          type: 'opentelemetry.proto.common.v1.InstrumentationScope',
                          id: 1,
                        },
                        spans: repeated('Span', 2),
                        schema_url: { type: 'string', id: 3 },
                      },
                    },
                    Span: {
                      fields: {
                        trace_id: { type: 'bytes', id: 1 },
                        span_id: { type: 'bytes', id: 2 },
                        trace_state: { type: 'string', id: 3 },
                        parent_span_id: { type: 'bytes', id: 4 },
                        flags: { type: 'fixed32', id: 16 },
                        name: { type: 'string', id: 5 },
                        kind: { type: 'SpanKind', id: 6 },
                        start_time_unix_nano: { type: 'fixed64', id: 7 },
                        end_time_unix_nano: { type: 'fixed64', id: 8 },
                        attributes: repeated('opentelemetry.proto.common.v1.KeyValue', 9),
                        dropped_attributes_count: { type: 'uint32', id: 10 },
                        events: repeated('Event', 11),
                        dropped_events_count: { type: 'uint32', id: 12 },
                        links: repeated('Link', 13),
                        dropped_links_count: { type: 'uint32', id: 14 },
                        status: { type: 'Status', id: 15 },
                      },
                      nested: {
                        SpanKind: {
                          values: {
                            SPAN_KIND_UNSPECIFIED: 0,
                            SPAN_KIND_INTERNAL: 1,
                            SPAN_KIND_SERVER: 2,
                            SPAN_KIND_CLIENT: 3,
                            SPAN_KIND_PRODUCER: 4,
                            SPAN_KIND_CONSUMER: 5,
                          },
                        },
                        Event: {
                          fields: {
                            time_unix_nano: { type: 'fixed64', id: 1 },
                            name: { type: 'string', id: 2 },
                            attributes: repeated('opentelemetry.proto.common.v1.KeyValue', 3),
                            dropped_attributes_count: { type: 'uint32', id: 4 },
                          },
                        },
                        Link: {
                          fields: {
                            trace_id: { type: 'bytes', id: 1 },
                            span_id: { type: 'bytes', id: 2 },
                            trace_state: { type: 'string', id: 3 },
                            attributes: repeated('opentelemetry.proto.common.v1.KeyValue', 4),
                            dropped_attributes_count: { type: 'uint32', id: 5 },
                            flags: { type: 'fixed32', id: 6 },
                          },
                        },
                      },
                    },
                    Status: {
                      // Field 1 is reserved (the deprecated `deprecated_code`).
                      fields: {
                        message: { type: 'string', id: 2 },
                        code: { type: 'StatusCode', id: 3 },
                      },
                      nested: {
                        StatusCode: {
                          values: { STATUS_CODE_UNSET: 0, STATUS_CODE_OK: 1, STATUS_CODE_ERROR: 2 },
                        },
                      },
                    },
                  },
                },
              },
            },
            collector: {
              nested: {
                trace: {
                  nested: {
                    v1: {
                      nested: {
                        ExportTraceServiceRequest: {
                          fields: {
                            resource_spans: repeated(
                              'opentelemetry.proto.trace.v1.ResourceSpans',
                              1,
                            ),
                          },
                        },
                        ExportTraceServiceResponse: {
                          fields: { partial_success: { type: 'ExportTracePartialSuccess', id: 1 } },
                        },
                        ExportTracePartialSuccess: {
                          fields: {
                            rejected_spans: { type: 'int64', id: 1 },
                            error_message: { type: 'string', id: 2 },
                          },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  },
});

const EXPORT_REQUEST = root.lookupType(
  'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest',
);
const EXPORT_RESPONSE = root.lookupType(
  'opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse',
);

// ---- Reading a request, binary or JSON, into spans ---------------------------------------------

/** A message as protobufjs's `toObject` (or `JSON.parse`) gives it: anything, checked on use. */
type Raw = Record<string, unknown>;

/**
 * How the two encodings differ: binary gives snake_case names and ids as base64 (`toObject`
 * with `bytes: String`); OTLP JSON gives lowerCamelCase names and ids as hex.
 */
interface Encoding {
  readonly field: (snake: string) => string;
  readonly id: (value: unknown) => string;
}

const BINARY: Encoding = {
  field: (snake) => snake,
  id: (value) => (typeof value === 'string' ? Buffer.from(value, 'base64').toString('hex') : ''),
};
const JSON_ENCODING: Encoding = {
  field: (snake) => snake.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase()),
  id: (value) => (typeof value === 'string' ? value.toLowerCase() : ''),
};

const KINDS: readonly OtlpSpanKind[] = [
  'unspecified',
  'internal',
  'server',
  'client',
  'producer',
  'consumer',
];
const STATUS_CODES: readonly OtlpStatusCode[] = ['unset', 'ok', 'error'];

function isRaw(value: unknown): value is Raw {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function list(value: unknown): Raw[] {
  return Array.isArray(value) ? value.filter(isRaw) : [];
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function nanos(value: unknown): bigint {
  return typeof value === 'string' || typeof value === 'number' ? BigInt(value) : 0n;
}

function enumIndex(value: unknown, names: readonly string[], prefix: string): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'string') return Math.max(0, names.indexOf(value.slice(prefix.length)));
  return 0;
}

function anyValue(value: unknown, enc: Encoding): OtlpValue {
  if (!isRaw(value)) return null;
  const f = enc.field;
  if (f('string_value') in value) return text(value[f('string_value')]);
  if (f('bool_value') in value) return value[f('bool_value')] === true;
  if (f('int_value') in value) return Number(value[f('int_value')]);
  if (f('double_value') in value) return Number(value[f('double_value')]);
  if (f('bytes_value') in value) return text(value[f('bytes_value')]);
  const array = value[f('array_value')];
  if (isRaw(array)) return list(array.values).map((item) => anyValue(item, enc));
  const kvlist = value[f('kvlist_value')];
  if (isRaw(kvlist)) return attributesOf(kvlist.values, enc);
  return null;
}

function attributesOf(values: unknown, enc: Encoding): OtlpAttributes {
  return Object.fromEntries(
    list(values).map((kv) => [text(kv.key), anyValue(kv.value, enc)] as const),
  );
}

function spansOf(request: Raw, enc: Encoding): ReceivedSpan[] {
  const f = enc.field;
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of list(request[f('resource_spans')])) {
    const resourceRaw = resourceSpans.resource;
    const resource = attributesOf(isRaw(resourceRaw) ? resourceRaw.attributes : [], enc);
    const serviceName = resource['service.name'];
    for (const scopeSpans of list(resourceSpans[f('scope_spans')])) {
      const scope = isRaw(scopeSpans.scope) ? text(scopeSpans.scope.name) : '';
      for (const span of list(scopeSpans.spans)) {
        const parent = enc.id(span[f('parent_span_id')]);
        const status = isRaw(span.status) ? span.status : {};
        spans.push({
          traceId: enc.id(span[f('trace_id')]),
          spanId: enc.id(span[f('span_id')]),
          parentSpanId: parent === '' ? undefined : parent,
          name: text(span.name),
          kind: KINDS[enumIndex(span.kind, KINDS, 'SPAN_KIND_')] ?? 'unspecified',
          serviceName: typeof serviceName === 'string' ? serviceName : undefined,
          resource,
          scope,
          startTimeUnixNano: nanos(span[f('start_time_unix_nano')]),
          endTimeUnixNano: nanos(span[f('end_time_unix_nano')]),
          attributes: attributesOf(span.attributes, enc),
          events: list(span.events).map((event) => ({
            name: text(event.name),
            timeUnixNano: nanos(event[f('time_unix_nano')]),
            attributes: attributesOf(event.attributes, enc),
          })),
          links: list(span.links).map((link) => ({
            traceId: enc.id(link[f('trace_id')]),
            spanId: enc.id(link[f('span_id')]),
            attributes: attributesOf(link.attributes, enc),
          })),
          status: {
            code: STATUS_CODES[enumIndex(status.code, STATUS_CODES, 'STATUS_CODE_')] ?? 'unset',
            message: text(status.message),
          },
        });
      }
    }
  }
  return spans;
}

/** Decodes an OTLP/HTTP binary export request. */
export function decodeProtobufRequest(body: Uint8Array): ReceivedSpan[] {
  const message = EXPORT_REQUEST.decode(body);
  const raw = EXPORT_REQUEST.toObject(message, { longs: String, bytes: String, enums: Number });
  return spansOf(raw, BINARY);
}

/** Reads an OTLP/HTTP JSON export request. */
export function decodeJsonRequest(body: string): ReceivedSpan[] {
  const parsed: unknown = JSON.parse(body);
  if (!isRaw(parsed)) throw new Error('the body is not a JSON object');
  return spansOf(parsed, JSON_ENCODING);
}

/** Encodes an export request from plain objects (snake_case names, ids as `Uint8Array`). */
export function encodeProtobufRequest(request: Record<string, unknown>): Uint8Array {
  return EXPORT_REQUEST.encode(EXPORT_REQUEST.fromObject(request)).finish();
}

// ---- The server --------------------------------------------------------------------------------

class RequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new RequestError(413, 'request body too large');
    chunks.push(chunk);
  }
  const body = Buffer.concat(chunks);
  const encoding = request.headers['content-encoding'];
  if (encoding === undefined || encoding === 'identity') return body;
  if (encoding === 'gzip') return gunzipSync(body);
  throw new RequestError(415, `unsupported content-encoding ${encoding}`);
}

/** Starts the receiver on `127.0.0.1` (a free port unless `port` is given). */
export async function startOtlpReceiver(options: { port?: number } = {}): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const errors: string[] = [];
  let requests = 0;
  const watchers = new Set<() => void>();
  const notify = () => {
    for (const watcher of [...watchers]) watcher();
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    if (path !== TRACES_PATH) throw new RequestError(404, `no OTLP signal at ${path}`);
    if (request.method !== 'POST') throw new RequestError(405, `${request.method} not allowed`);
    const type = (request.headers['content-type'] ?? '').split(';')[0]?.trim();
    const body = await readBody(request);
    if (type === 'application/x-protobuf') {
      let received: ReceivedSpan[];
      try {
        received = decodeProtobufRequest(body);
      } catch (error) {
        throw new RequestError(400, `undecodable protobuf: ${String(error)}`);
      }
      spans.push(...received);
      requests += 1;
      const answer = EXPORT_RESPONSE.encode(EXPORT_RESPONSE.create({})).finish();
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(answer);
    } else if (type === 'application/json') {
      let received: ReceivedSpan[];
      try {
        received = decodeJsonRequest(body.toString('utf8'));
      } catch (error) {
        throw new RequestError(400, `unreadable JSON: ${String(error)}`);
      }
      spans.push(...received);
      requests += 1;
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    } else {
      throw new RequestError(415, `unsupported content-type ${type ?? '(none)'}`);
    }
    notify();
  };

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      const status = error instanceof RequestError ? error.status : 500;
      errors.push(`${status}: ${error instanceof Error ? error.message : String(error)}`);
      if (!response.headersSent) response.writeHead(status, { 'content-type': 'text/plain' });
      response.end(error instanceof Error ? error.message : 'failed');
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const endpoint = `http://127.0.0.1:${port}`;

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    return stopping;
  };

  return {
    endpoint,
    tracesUrl: `${endpoint}${TRACES_PATH}`,
    spans,
    get requests() {
      return requests;
    },
    errors,
    waitFor(predicate, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate(spans)) return;
          clearTimeout(timer);
          watchers.delete(check);
          resolve([...spans]);
        };
        const timer = setTimeout(() => {
          watchers.delete(check);
          const names = [...new Set(spans.map((s) => `${s.serviceName ?? '?'}: ${s.name}`))];
          reject(
            new Error(
              `the spans expected did not arrive within ${timeoutMs} ms; ${spans.length} received: ${names.join(', ') || 'none'}`,
            ),
          );
        }, timeoutMs);
        watchers.add(check);
        check();
      });
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
