/**
 * deploy/: the compose stack cannot be started here (no Docker), so this checks everything that can
 * be checked without running it:
 *
 * - compose.yaml parses; images are pinned; NATS runs JetStream; every Sluice service runs an
 *   existing entry point through deploy/run-service.sh;
 * - each Sluice service's environment, as compose would pass it with no variables set, loads with
 *   that service's own configuration loader, and points at the compose NATS and Postgres;
 * - every SLUICE_ variable set is one the service reads (a typo would be silently ignored);
 * - the executors are exactly those the built-in task types need (as `npm start` picks them);
 * - Prometheus scrapes every service's metrics port, and nothing else in the Sluice job;
 * - every metric a dashboard query names is one the services export, and every catalogue metric is
 *   on the dashboard;
 * - the Grafana provisioning files parse and reference files and datasources that exist.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parse } from 'yaml';
import { z } from 'zod';
import {
  BUILTIN_TASK_MODULE_FILE,
  serviceNodeArgs,
  ensureServiceBundles,
} from '@sluice/service-bundles';
import { METRIC_DEFINITIONS, createMetrics } from '@sluice/telemetry';
import { resourcesOfTaskModules } from '../../scripts/start/resources.js';
import {
  BUILTIN_TASK_MODULE,
  EXECUTOR_ENV,
  loadExecutorConfig,
} from '../../services/executor/src/config.js';
import { GATEWAY_ENV, loadGatewayConfig } from '../../services/gateway/src/config.js';
import { GOVERNOR_ENV, loadGovernorConfig } from '../../services/governor/src/config.js';
import { SCHEDULER_ENV, loadSchedulerConfig } from '../../services/scheduler/src/config.js';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DEPLOY = path.join(REPO_ROOT, 'deploy');

// --- The files, parsed and typed ---------------------------------------------------------------

const composeServiceSchema = z.object({
  image: z.string().optional(),
  build: z.object({ context: z.string(), dockerfile: z.string() }).optional(),
  command: z.array(z.string()).optional(),
  // Strings only: the loaders read text, and compose would pass a YAML number on unchanged.
  environment: z.record(z.string(), z.string()).optional(),
  volumes: z.array(z.string()).optional(),
  ports: z.array(z.string()).optional(),
});
type ComposeService = z.infer<typeof composeServiceSchema>;

const composeSchema = z.object({
  services: z.record(z.string(), composeServiceSchema),
  volumes: z.record(z.string(), z.null()).optional(),
});

const prometheusSchema = z.object({
  scrape_configs: z.array(
    z.object({
      job_name: z.string(),
      metrics_path: z.string().optional(),
      static_configs: z.array(
        z.object({
          targets: z.array(z.string()),
          labels: z.record(z.string(), z.string()).optional(),
        }),
      ),
    }),
  ),
});

const datasourcesSchema = z.object({
  apiVersion: z.literal(1),
  datasources: z.array(
    z.object({ name: z.string(), uid: z.string(), type: z.string(), url: z.string() }),
  ),
});

const dashboardProvidersSchema = z.object({
  apiVersion: z.literal(1),
  providers: z.array(
    z.object({
      name: z.string(),
      type: z.literal('file'),
      options: z.object({ path: z.string() }),
    }),
  ),
});

const datasourceRefSchema = z.object({ type: z.string(), uid: z.string() });

/** A dashboard panel; rows carry their (collapsed) panels inside. */
interface Panel {
  readonly title: string;
  readonly type: string;
  readonly datasource?: z.infer<typeof datasourceRefSchema> | undefined;
  readonly targets?:
    | ReadonlyArray<{
        readonly expr?: string | undefined;
        readonly datasource?: z.infer<typeof datasourceRefSchema> | undefined;
      }>
    | undefined;
  readonly panels?: readonly Panel[] | undefined;
}

const panelSchema: z.ZodType<Panel> = z.lazy(() =>
  z.object({
    title: z.string(),
    type: z.string(),
    datasource: datasourceRefSchema.optional(),
    targets: z
      .array(z.object({ expr: z.string().optional(), datasource: datasourceRefSchema.optional() }))
      .optional(),
    panels: z.array(panelSchema).optional(),
  }),
);

const dashboardSchema = z.object({
  uid: z.string(),
  title: z.string(),
  panels: z.array(panelSchema),
});

/** Reads a YAML file under deploy/, with compose's `<<` merge keys. */
function readYaml(relative: string): unknown {
  return parse(readFileSync(path.join(DEPLOY, relative), 'utf8'), { merge: true }) as unknown;
}

const compose = composeSchema.parse(readYaml('compose.yaml'));
const prometheus = prometheusSchema.parse(readYaml('prometheus/prometheus.yml'));
const dashboard = dashboardSchema.parse(
  JSON.parse(readFileSync(path.join(DEPLOY, 'grafana/dashboards/sluice.json'), 'utf8')),
);

/**
 * A value as compose passes it when none of the variables it names is set: `${X:-default}` and
 * `${X-default}` become the default, `${X}` the empty string, `$$` a `$`.
 */
function interpolate(value: string): string {
  return value.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$/g,
    (match: string, name: string | undefined, fallback: string | undefined) => {
      if (match === '$$') return '$';
      assert.ok(name !== undefined, `unsupported interpolation in ${JSON.stringify(value)}`);
      return fallback ?? '';
    },
  );
}

/** The services of the compose file built from deploy/Dockerfile: Sluice's own. */
const sluiceServices: ReadonlyArray<[string, ComposeService]> = Object.entries(
  compose.services,
).filter(([, service]) => service.build?.dockerfile === 'deploy/Dockerfile');

/** A Sluice service's environment as the process would see it. */
function environmentOf(service: ComposeService): Record<string, string> {
  return Object.fromEntries(
    Object.entries(service.environment ?? {}).map(([name, value]) => [name, interpolate(value)]),
  );
}

/** Which program a Sluice service runs (`gateway`, `executor` …) and its arguments. */
function programOf(service: ComposeService): { program: string; args: string[] } {
  const [program, ...args] = service.command ?? [];
  assert.ok(program, 'a Sluice service names its program in `command`');
  return { program, args };
}

/** Each program's loader and the variables its schema reads. */
const PROGRAMS: Record<
  string,
  {
    readonly load: (
      env: Record<string, string>,
      argv: readonly string[],
    ) => Record<string, unknown>;
    readonly schema: Readonly<Record<string, unknown>>;
  }
> = {
  gateway: { load: (env) => loadGatewayConfig(env), schema: GATEWAY_ENV },
  scheduler: { load: (env) => loadSchedulerConfig(env), schema: SCHEDULER_ENV },
  governor: { load: (env) => loadGovernorConfig(env), schema: GOVERNOR_ENV },
  executor: { load: (env, argv) => loadExecutorConfig(env, argv), schema: EXECUTOR_ENV },
};

/** A Sluice service's loaded configuration. */
function configOf(name: string, service: ComposeService): Record<string, unknown> {
  const { program, args } = programOf(service);
  const entry = PROGRAMS[program];
  assert.ok(entry, `${name}: unknown program ${program}`);
  try {
    return entry.load(environmentOf(service), args);
  } catch (error) {
    assert.fail(`${name}: its environment does not load: ${String(error)}`);
  }
}

/** The host-side file or folder a container path of a service's bind mounts comes from. */
function hostPathOf(service: ComposeService, containerPath: string): string | undefined {
  for (const volume of service.volumes ?? []) {
    const [source, target] = volume.split(':');
    if (source === undefined || target === undefined || !source.startsWith('.')) continue;
    if (containerPath === target || containerPath.startsWith(`${target}/`)) {
      return path.join(DEPLOY, source, containerPath.slice(target.length));
    }
  }
  return undefined;
}

/** Every panel, rows' nested ones included. */
function allPanels(panels: readonly Panel[]): Panel[] {
  return panels.flatMap((panel) => [panel, ...allPanels(panel.panels ?? [])]);
}

/** The metric names a PromQL expression uses. */
function metricNamesIn(expr: string): string[] {
  return expr.match(/\b(?:sluice|process|nodejs)_[a-z0-9_]+/g) ?? [];
}

/**
 * Every series name a service's `/metrics` can carry: the catalogue and Node's default metrics as
 * the registry declares them (`# TYPE`), with the `_bucket`, `_sum` and `_count` series of
 * histograms (and `_sum`, `_count` of summaries).
 */
async function exportedSeriesNames(): Promise<Set<string>> {
  const text = await createMetrics().registry.metrics();
  const names = new Set<string>();
  for (const match of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = match;
    if (name === undefined) continue;
    names.add(name);
    const suffixes =
      type === 'histogram'
        ? ['_bucket', '_sum', '_count']
        : type === 'summary'
          ? ['_sum', '_count']
          : [];
    for (const suffix of suffixes) names.add(`${name}${suffix}`);
  }
  return names;
}

// --- The tests ----------------------------------------------------------------------------------

describe('deploy/compose.yaml', () => {
  it('runs NATS with JetStream, Postgres, Jaeger, Prometheus, Grafana and the Sluice services', () => {
    for (const name of ['nats', 'postgres', 'jaeger', 'prometheus', 'grafana']) {
      assert.ok(compose.services[name], `service ${name} is missing`);
    }
    const programs = sluiceServices.map(([, service]) => programOf(service).program);
    for (const program of Object.keys(PROGRAMS)) {
      assert.ok(programs.includes(program), `no Sluice service runs ${program}`);
    }

    const nats = compose.services['nats'];
    assert.ok(nats?.command?.includes('-js'), 'NATS runs with JetStream (-js)');
    assert.ok(
      nats?.volumes?.some((v) => v.endsWith(':/data')),
      'JetStream stores on a volume',
    );
    assert.ok(
      compose.services['postgres']?.volumes?.some((v) => v.endsWith(':/var/lib/postgresql/data')),
      'Postgres stores on a volume',
    );
    const jaegerPorts = compose.services['jaeger']?.ports ?? [];
    for (const port of ['4317', '4318']) {
      assert.ok(
        jaegerPorts.some((p) => p.endsWith(`:${port}`)),
        `Jaeger publishes OTLP ${port}`,
      );
    }
  });

  it('pins every image and declares every named volume', () => {
    const declared = Object.keys(compose.volumes ?? {});
    for (const [name, service] of Object.entries(compose.services)) {
      const image = service.image;
      assert.ok(image, `${name} names an image`);
      // Sluice's own image is built here, from the pinned base image of deploy/Dockerfile.
      if (!service.build) {
        const tag = /:([^/:]+)$/.exec(image)?.[1];
        assert.ok(tag && tag !== 'latest' && /\d/.test(tag), `${name}: ${image} is not pinned`);
      }
      for (const volume of service.volumes ?? []) {
        const source = volume.split(':')[0] ?? '';
        if (source.startsWith('.')) {
          assert.ok(existsSync(path.join(DEPLOY, source)), `${name}: ${source} does not exist`);
        } else {
          assert.ok(declared.includes(source), `${name}: volume ${source} is not declared`);
        }
      }
    }
    const dockerfile = readFileSync(path.join(DEPLOY, 'Dockerfile'), 'utf8');
    const base = /^FROM (\S+)/m.exec(dockerfile)?.[1];
    assert.match(base ?? '', /^node:20\.\d+\.\d+-/, 'the Dockerfile pins a Node 20 base image');
  });

  it('runs each Sluice service from deploy/Dockerfile through an existing entry point', () => {
    assert.ok(sluiceServices.length >= 7, `only ${sluiceServices.length} Sluice services`);
    const dockerfile = readFileSync(path.join(DEPLOY, 'Dockerfile'), 'utf8');
    assert.match(dockerfile, /npx -y pnpm@12\.4\.2 install --frozen-lockfile/);
    assert.match(dockerfile, /buf build -o proto\/sluice\.binpb/);
    for (const service of ['gateway', 'scheduler', 'governor', 'executor']) {
      // Built in the image: the services run as user node, who cannot write the cache.
      assert.match(dockerfile, new RegExp(`bundle-of-main\\.ts ${service}\\b`), service);
    }
    assert.match(dockerfile, /^ENTRYPOINT \["sh", "deploy\/run-service\.sh"\]$/m);
    for (const [name, service] of sluiceServices) {
      assert.equal(service.build?.context, '..', `${name}: the build context is the repository`);
      const { program } = programOf(service);
      const entry = path.join(REPO_ROOT, 'services', program, 'src', 'main.ts');
      assert.ok(statSync(entry).isFile(), `${name}: ${entry} does not exist`);
    }
  });

  it("builds the executor's default task modules in the image, where its services cannot write", () => {
    const dockerfile = readFileSync(path.join(DEPLOY, 'Dockerfile'), 'utf8');
    assert.match(dockerfile, /bundle-of-main\.ts executor\b/);
    assert.doesNotMatch(dockerfile, /^[^#\n]*SLUICE_TASK_MODULES/m, 'so the built-in ones');
    assert.equal(pathToFileURL(BUILTIN_TASK_MODULE_FILE).href, BUILTIN_TASK_MODULE);
  });

  it('deploy/run-service.sh refuses a service that does not exist', () => {
    const result = spawnSync('sh', ['deploy/run-service.sh', 'no-such-service'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    assert.equal(result.status, 64);
    assert.match(result.stderr, /no service named 'no-such-service'/);
  });

  it('deploy/run-service.sh runs each service from its bundle, with its arguments', async () => {
    await ensureServiceBundles();
    // A `node` first on the PATH that records how the script runs a service (and lets the
    // script's own questions, which bundle, through to the real one, noting which it asked).
    const dir = mkdtempSync(path.join(tmpdir(), 'sluice-run-service-'));
    try {
      const record = path.join(dir, 'args');
      const questions = path.join(dir, 'questions');
      writeFileSync(
        path.join(dir, 'node'),
        [
          '#!/bin/sh',
          `case "$*" in *-main.ts*|*-main.mjs*) echo "$*" >> '${questions}'; exec '${process.execPath}' "$@" ;; esac`,
          `printf '%s\\n' "$@" > '${record}'`,
        ].join('\n'),
      );
      chmodSync(path.join(dir, 'node'), 0o755);
      const runService = (...args: string[]) => {
        const result = spawnSync('sh', ['deploy/run-service.sh', ...args], {
          cwd: REPO_ROOT,
          env: { ...process.env, PATH: `${dir}:${process.env['PATH'] ?? ''}` },
          encoding: 'utf8',
        });
        assert.equal(result.status, 0, result.stderr);
        return readFileSync(record, 'utf8').trimEnd().split('\n');
      };
      // What every other start of a service runs too (serviceNodeArgs): its startup module.
      for (const service of ['gateway', 'scheduler', 'governor']) {
        assert.deepEqual(runService(service), serviceNodeArgs(service));
      }
      assert.deepEqual(runService('executor', '--resource', 'tool:http'), [
        ...serviceNodeArgs('executor'),
        '--resource',
        'tool:http',
      ]);
      // The bundles are fresh: each start asked the plain-JavaScript check only, never bundle-of
      // (which loads tsx, about half a CPU-second).
      const asked = readFileSync(questions, 'utf8').trimEnd().split('\n');
      assert.equal(asked.length, 4);
      for (const question of asked) assert.match(question, /fresh-bundle-main\.mjs /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("loads each Sluice service's environment with that service's configuration loader", () => {
    const postgresEnv = compose.services['postgres']?.environment ?? {};
    const ports = new Set<number>();
    for (const [name, service] of sluiceServices) {
      const env = environmentOf(service);
      const config = configOf(name, service);

      const nats = new URL(String(config['NATS_URL']));
      assert.equal(nats.hostname, 'nats', `${name}: NATS_URL`);
      assert.equal(nats.port, '4222', `${name}: NATS_URL`);
      const database = new URL(String(config['DATABASE_URL']));
      assert.equal(database.hostname, 'postgres', `${name}: DATABASE_URL`);
      assert.equal(database.username, postgresEnv['POSTGRES_USER'], `${name}: DATABASE_URL user`);
      assert.equal(database.password, postgresEnv['POSTGRES_PASSWORD'], `${name}: password`);
      assert.equal(database.pathname, `/${postgresEnv['POSTGRES_DB']}`, `${name}: database`);

      // A fixed, distinct metrics port, so that Prometheus knows where to scrape.
      const port = config['SLUICE_METRICS_PORT'];
      assert.ok(typeof port === 'number' && port > 0, `${name}: SLUICE_METRICS_PORT is fixed`);
      assert.ok(!ports.has(port), `${name}: metrics port ${port} is taken twice`);
      ports.add(port);
      assert.ok(env['SLUICE_LOG_LEVEL'], `${name}: SLUICE_LOG_LEVEL is set`);

      // OpenTelemetry's standard variables (the loaders ignore them; the SDK reads them).
      assert.equal(env['OTEL_SERVICE_NAME'], `sluice-${name}`);
      assert.equal(env['OTEL_EXPORTER_OTLP_ENDPOINT'], 'http://jaeger:4318');
      assert.equal(env['OTEL_EXPORTER_OTLP_PROTOCOL'], 'http/protobuf');
      assert.equal(env['OTEL_TRACES_SAMPLER'], 'parentbased_always_on');
    }
    const gateway = loadGatewayConfig(environmentOf(compose.services['gateway'] ?? {}));
    assert.equal(gateway.SLUICE_GRPC_HOST, '0.0.0.0', 'the gRPC API is reachable from outside');
    assert.ok(
      compose.services['gateway']?.ports?.some((p) => p.endsWith(`:${gateway.SLUICE_GRPC_PORT}`)),
      'the gateway publishes its gRPC port',
    );
  });

  it('sets only SLUICE_ variables that the service reads', () => {
    for (const [name, service] of sluiceServices) {
      const { schema } = PROGRAMS[programOf(service).program] ?? { schema: {} };
      for (const variable of Object.keys(service.environment ?? {})) {
        if (!variable.startsWith('SLUICE_')) continue;
        assert.ok(variable in schema, `${name}: ${variable} is not read by the service`);
      }
    }
  });

  it('runs one executor per resource class of the built-in task types', async () => {
    const resources = sluiceServices
      .filter(([, service]) => programOf(service).program === 'executor')
      .map(([name, service]) => String(configOf(name, service)['SLUICE_RESOURCE']))
      .sort();
    assert.deepEqual(resources, await resourcesOfTaskModules(undefined));
  });
});

describe('deploy/prometheus/prometheus.yml', () => {
  const sluiceJob = prometheus.scrape_configs.find((job) => job.job_name === 'sluice');

  it("scrapes every Sluice service's metrics port, and only those", () => {
    assert.ok(sluiceJob, 'a scrape job named sluice');
    const targets = sluiceJob.static_configs.flatMap((c) => c.targets).sort();
    const expected = sluiceServices
      .map(([name, service]) => `${name}:${String(configOf(name, service)['SLUICE_METRICS_PORT'])}`)
      .sort();
    assert.deepEqual(targets, expected);
  });

  it('adds no target label that a Sluice metric already carries', () => {
    // A clash would rename the metric's own label to exported_<name> and break the dashboard.
    const metricLabels = new Set<string>(
      Object.values(METRIC_DEFINITIONS).flatMap((d) => [...d.labelNames]),
    );
    for (const config of sluiceJob?.static_configs ?? []) {
      for (const label of Object.keys(config.labels ?? {})) {
        assert.ok(!metricLabels.has(label), `target label ${label} clashes with a metric label`);
      }
    }
  });

  it('is the file the Prometheus container reads', () => {
    const mounted = hostPathOf(
      compose.services['prometheus'] ?? {},
      '/etc/prometheus/prometheus.yml',
    );
    assert.equal(mounted, path.join(DEPLOY, 'prometheus/prometheus.yml'));
  });
});

describe('deploy/grafana', () => {
  const panels = allPanels(dashboard.panels);
  const queries = panels.flatMap((panel) => (panel.targets ?? []).map((t) => t.expr ?? ''));
  const used = new Set(queries.flatMap(metricNamesIn));

  it('every dashboard query names only metrics the services export', async () => {
    assert.ok(queries.length > 20, `only ${queries.length} queries`);
    assert.ok(used.size > 10, `only ${used.size} metric names found in the queries`);
    const exported = await exportedSeriesNames();
    for (const definition of Object.values(METRIC_DEFINITIONS)) {
      assert.ok(exported.has(definition.name), `${definition.name} is not in the registry`);
    }
    for (const name of used) assert.ok(exported.has(name), `${name} is not exported`);
  });

  it('has every catalogue metric on at least one panel', () => {
    const missing = Object.values(METRIC_DEFINITIONS)
      .map((d) => d.name)
      .filter((name) =>
        ['', '_bucket', '_sum', '_count'].every((suffix) => !used.has(`${name}${suffix}`)),
      );
    assert.deepEqual(missing, []);
  });

  it('gives every data panel a query and a provisioned datasource', () => {
    const datasources = datasourcesSchema.parse(
      readYaml('grafana/provisioning/datasources/sluice.yaml'),
    ).datasources;
    const uids = new Set(datasources.map((d) => d.uid));
    const dataPanels = panels.filter((panel) => panel.type !== 'row');
    assert.ok(dataPanels.length > 20, `only ${dataPanels.length} panels`);
    for (const panel of dataPanels) {
      assert.ok(panel.targets?.length, `${panel.title}: no query`);
      for (const ref of [panel.datasource, ...panel.targets.map((t) => t.datasource)]) {
        assert.ok(
          ref && uids.has(ref.uid),
          `${panel.title}: datasource ${ref?.uid} is not provisioned`,
        );
      }
      for (const target of panel.targets) {
        assert.ok(
          target.expr && metricNamesIn(target.expr).length > 0,
          `${panel.title}: ${target.expr}`,
        );
      }
    }
  });

  it('provisions Prometheus and Jaeger at their compose services', () => {
    const datasources = datasourcesSchema.parse(
      readYaml('grafana/provisioning/datasources/sluice.yaml'),
    ).datasources;
    const byType = new Map(datasources.map((d) => [d.type, new URL(d.url)]));
    assert.equal(byType.get('prometheus')?.host, 'prometheus:9090');
    assert.equal(byType.get('jaeger')?.host, 'jaeger:16686');
    const grafana = compose.services['grafana'] ?? {};
    assert.equal(
      hostPathOf(grafana, '/etc/grafana/provisioning/datasources/sluice.yaml'),
      path.join(DEPLOY, 'grafana/provisioning/datasources/sluice.yaml'),
    );
  });

  it('provisions the dashboard from a folder the Grafana container mounts', () => {
    const grafana = compose.services['grafana'] ?? {};
    const providerFile = hostPathOf(grafana, '/etc/grafana/provisioning/dashboards/sluice.yaml');
    assert.ok(providerFile && existsSync(providerFile), 'the dashboard provider file is mounted');
    const providers = dashboardProvidersSchema.parse(
      readYaml('grafana/provisioning/dashboards/sluice.yaml'),
    ).providers;
    assert.equal(providers.length, 1);
    const folder = hostPathOf(grafana, providers[0]?.options.path ?? '');
    assert.equal(folder, path.join(DEPLOY, 'grafana/dashboards'));
    assert.ok(existsSync(path.join(folder, 'sluice.json')), 'the dashboard is in that folder');
    const home = grafana.environment?.['GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH'];
    assert.ok(home && existsSync(hostPathOf(grafana, home) ?? ''), 'the home dashboard exists');
  });
});
