// A real MCP client, the official TypeScript SDK, against karpor: over the streamable HTTP
// transport at /mcp and over stdio through `karpor mcp`. It calls what tests/it/mcp.rs
// asks (KARPOR_* in the environment) and prints one JSON report on stdout; the Rust test
// decides what is right. A step that throws is reported with its error, never hidden.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import Ajv2020 from 'ajv/dist/2020.js';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const url = env('KARPOR_URL');
const cluster = env('KARPOR_CLUSTER');
const nsA = env('KARPOR_NS_A');
const nsB = env('KARPOR_NS_B');

function http(token) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  return new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } });
}

function stdio(tokenFile) {
  return new StdioClientTransport({
    command: env('KARPOR_BIN'),
    args: ['mcp', '--server', url, '--token-file', tokenFile],
    stderr: 'pipe',
  });
}

async function connected(transport) {
  const client = new Client({ name: 'karpor-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

/// A step's outcome: its value, or the error it threw (message and MCP code).
async function step(work) {
  try {
    return { ok: await work() };
  } catch (e) {
    return { error: String(e?.message ?? e), code: e?.code ?? null };
  }
}

function schemas(tools) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  return tools.map((tool) => {
    const check = (schema) => {
      if (!schema) return null;
      try {
        ajv.compile(schema);
        return 'valid';
      } catch (e) {
        return String(e.message);
      }
    };
    return {
      name: tool.name,
      described: (tool.description ?? '').length > 20,
      input: check(tool.inputSchema),
      inputType: tool.inputSchema?.type,
      output: check(tool.outputSchema),
      readOnly: tool.annotations?.readOnlyHint ?? null,
    };
  });
}

const call = (client, name, args) =>
  step(async () => {
    const r = await client.callTool({ name, arguments: args });
    return { isError: r.isError ?? false, text: r.content?.[0]?.text ?? '', structured: r.structuredContent ?? null };
  });

/// Every tool, good arguments and bad ones, as one caller.
async function tools(client) {
  const out = {};
  out.server = client.getServerVersion();
  out.instructions = (client.getInstructions() ?? '').length;
  out.tools = schemas((await client.listTools()).tools);
  out.clusters = await call(client, 'clusters', {});
  out.search = await call(client, 'search', {
    query: `select * from resources where kind = 'Deployment' and namespace = '${nsA}'`,
  });
  out.keyword = await call(client, 'search', { query: 'settings', pattern: 'keyword', pageSize: 5 });
  out.describe = await call(client, 'describe', { cluster, kind: 'Deployment', namespace: nsA, name: 'web' });
  out.topology = await call(client, 'topology', { cluster, namespace: nsA, kind: 'Deployment', name: 'web', hops: 1 });
  out.kinds = await call(client, 'topology', { cluster, namespace: nsA });
  out.audit = await call(client, 'audit', { cluster, namespace: nsA, limit: 5 });
  out.changes = await call(client, 'changes', { cluster, namespace: nsA, since: '1h' });
  out.history = await call(client, 'history', { cluster, kind: 'ConfigMap', namespace: nsA, name: 'settings' });
  out.secrets = await call(client, 'search', {
    query: `select * from resources where kind = 'Secret' and namespace = '${nsA}'`,
  });
  out.secret = await call(client, 'describe', { cluster, kind: 'Secret', namespace: nsA, name: 'creds' });
  out.prompts = (await client.listPrompts()).prompts.map((p) => ({
    name: p.name,
    arguments: (p.arguments ?? []).map((a) => `${a.name}${a.required ? '' : '?'}`),
  }));
  out.prompt = await step(async () => {
    const r = await client.getPrompt({ name: 'diagnose', arguments: { cluster, kind: 'Deployment', namespace: nsA, name: 'web' } });
    return r.messages.map((m) => m.content.text).join('\n');
  });
  out.badPrompt = await step(() =>
    client.getPrompt({ name: 'diagnose', arguments: { cluster, kind: 'Deployment', namespace: 'Not Valid', name: 'web' } }),
  );
  out.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
  const read = (uri) =>
    step(async () => {
      const r = await client.readResource({ uri });
      return r.contents.map((c) => ({ uri: c.uri, mimeType: c.mimeType, text: c.text }));
    });
  out.resource = await read(`karpor://${cluster}/ConfigMap/${nsA}/settings`);
  out.secretResource = await read(`karpor://${cluster}/Secret/${nsA}/creds`);
  out.badResource = await read(`karpor://${cluster}/ConfigMap/../../etc/passwd`);
  out.bad = {
    type: await call(client, 'search', { query: 5 }),
    unknownField: await call(client, 'search', { query: 'x', colour: 'red' }),
    missing: await call(client, 'describe', { cluster }),
    name: await call(client, 'describe', { cluster, kind: 'Pod', namespace: '../etc', name: 'x' }),
    pageSize: await call(client, 'search', { query: 'select * from resources', pageSize: 1000 }),
    sql: await call(client, 'search', { query: 'select * from nowhere' }),
    unknownTool: await call(client, 'delete_cluster', {}),
    absent: await call(client, 'describe', { cluster, kind: 'ConfigMap', namespace: nsA, name: 'not-there' }),
  };
  return out;
}

const report = {};

report.http = await step(async () => {
  const client = await connected(http(env('KARPOR_ADMIN_TOKEN')));
  const out = await tools(client);
  out.protocol = client.transport?.protocolVersion ?? null;
  await client.close();
  return out;
});

report.stdio = await step(async () => {
  const transport = stdio(env('KARPOR_ADMIN_TOKEN_FILE'));
  let stderr = '';
  const client = await connected(transport);
  transport.stderr?.on('data', (d) => (stderr += d));
  const out = await tools(client);
  await client.close();
  out.stderr = stderr;
  return out;
});

report.guest = await step(async () => {
  const client = await connected(http(env('KARPOR_GUEST_TOKEN')));
  const out = {
    configmaps: await call(client, 'search', { query: "select * from resources where kind = 'ConfigMap'", pageSize: 100 }),
    hidden: await call(client, 'describe', { cluster, kind: 'ConfigMap', namespace: nsB, name: 'hidden' }),
    hiddenResource: await step(() => client.readResource({ uri: `karpor://${cluster}/ConfigMap/${nsB}/hidden` })),
    audit: await call(client, 'audit', {}),
    changes: await call(client, 'changes', { since: '1h', pageSize: 100 }),
  };
  await client.close();
  return out;
});

report.refused = {
  none: await step(() => connected(http(null))),
  wrong: await step(() => connected(http('not-a-token'))),
  stdioWrong: await step(() => connected(stdio(env('KARPOR_WRONG_TOKEN_FILE')))),
};

process.stdout.write(JSON.stringify(report));
process.exit(0);
