// A small ACP client on the official TypeScript SDK (@agentclientprotocol/sdk),
// for tests/suite/acp.rs: it starts `fido acp`, plays the scenario given as
// JSON in argv[2], checks every frame Fido writes against the SDK's schemas
// (generated from the published ACP JSON schema), and prints one JSON
// object: what happened, the frames, and the frames that did not validate.
//
// Scenario: { fido, args, cwd, permission, subagents, steps: [...] } where a step is
//   {"do": "new"}                          session/new in cwd
//   {"do": "prompt", "text": "...", "cancelAfterMs": N}
//   {"do": "list"}                         session/list
//   {"do": "load", "id": "..."}            session/load ("$session": the last one)
//   {"do": "mode", "mode": "..."}          session/set_mode of the last session
//   {"do": "config", "id": "...", "value": "..."}
//                                          session/set_config_option of the last session
//   {"do": "restart"}                      close the connection, start fido again
//   {"do": "quit"}                         close stdin mid-turn-free, wait for exit
// and `permission` is the option picked for every permission request
// ("allow_once", "allow_always", "reject_once", "reject_always"), or
// "cancel": send session/cancel and answer the request `cancelled`.
// With `buffers` ({path relative to cwd: text}) the client advertises
// fs.readTextFile and answers fs/read_text_file with that text (an
// editor's unsaved buffer), or an error for a file it has no buffer of.
// With `writes` the client also advertises fs.writeTextFile and answers
// fs/write_text_file by keeping the text as that file's buffer (the disk
// is left alone, as an editor's unsaved buffer would be).
// With `subagents` the client advertises the (unstable) subagents
// capability, uses the SDK's unstable schemas, and, when `subagents` is
// "cancel", sends session/cancel on a child session once the child's
// first tool call completed.
//
// The SDK is found through ACP_NODE_MODULES (a node_modules folder).

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import path from "node:path";

const modules = process.env.ACP_NODE_MODULES;
const sdkFile = (rel) =>
  pathToFileURL(path.join(modules, "@agentclientprotocol/sdk/dist", rel)).href;
const scenario = JSON.parse(process.argv[2]);
const unstable = scenario.subagents !== undefined;
const acp = await import(sdkFile(unstable ? "v1/unstable/acp.js" : "v1/stable/acp.js"));
const zod = await import(
  sdkFile(unstable ? "v1/unstable/schema/zod.gen.js" : "v1/schema/zod.gen.js")
);

const report = { events: [], frames: [], invalid: [], exits: [] };
const log = (event) => { report.events.push(event); if (process.env.ACP_CLIENT_TRACE) process.stderr.write(JSON.stringify(event) + "\n"); };

// The schema of each result, by the method that asked for it.
const resultSchemas = {
  initialize: zod.zInitializeResponse,
  "session/new": zod.zNewSessionResponse,
  "session/load": zod.zLoadSessionResponse,
  "session/list": zod.zListSessionsResponse,
  "session/prompt": zod.zPromptResponse,
  "session/set_mode": zod.zSetSessionModeResponse,
  "session/set_config_option": zod.zSetSessionConfigOptionResponse,
};

function checkFrame(line, sent) {
  let frame;
  try {
    frame = JSON.parse(line);
  } catch (err) {
    report.invalid.push({ line, why: "not JSON" });
    return;
  }
  report.frames.push(frame);
  const fail = (why) => report.invalid.push({ line, why: String(why) });
  if (frame.jsonrpc !== "2.0") return fail("not JSON-RPC 2.0");
  if (frame.method === "session/update") {
    const r = zod.zSessionNotification.safeParse(frame.params);
    if (!r.success) fail(r.error);
  } else if (frame.method === "session/request_permission") {
    const r = zod.zRequestPermissionRequest.safeParse(frame.params);
    if (!r.success) fail(r.error);
  } else if (frame.method === "fs/read_text_file") {
    const r = zod.zReadTextFileRequest.safeParse(frame.params);
    if (!r.success) fail(r.error);
  } else if (frame.method === "fs/write_text_file") {
    const r = zod.zWriteTextFileRequest.safeParse(frame.params);
    if (!r.success) fail(r.error);
  } else if (frame.method === "$/cancel_request") {
    const r = zod.zCancelRequestNotification.safeParse(frame.params);
    if (!r.success) fail(r.error);
  } else if (frame.method !== undefined) {
    fail(`unexpected method ${frame.method}`);
  } else if (frame.error !== undefined) {
    const r = zod.zError.safeParse(frame.error);
    if (!r.success) fail(r.error);
  } else {
    const schema = resultSchemas[sent.get(frame.id)];
    if (schema) {
      const r = schema.safeParse(frame.result);
      if (!r.success) fail(r.error);
    }
  }
}

// Copies each line that passes through into `onLine`.
function tap(onLine) {
  let buffered = "";
  const decoder = new TextDecoder();
  return new TransformStream({
    transform(chunk, controller) {
      buffered += decoder.decode(chunk, { stream: true });
      let at;
      while ((at = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, at);
        buffered = buffered.slice(at + 1);
        if (line.trim() !== "") onLine(line);
      }
      controller.enqueue(chunk);
    },
  });
}

function startFido() {
  const child = spawn(scenario.fido, scenario.args ?? ["acp"], {
    cwd: scenario.cwd,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  const sent = new Map();
  const output = tap((line) => {
    try {
      const frame = JSON.parse(line);
      if (frame.id !== undefined && frame.method) sent.set(frame.id, frame.method);
    } catch {}
  });
  output.readable.pipeTo(Writable.toWeb(child.stdin)).catch(() => {});
  const input = Readable.toWeb(child.stdout).pipeThrough(tap((line) => checkFrame(line, sent)));
  return { child, exited, stream: acp.ndJsonStream(output.writable, input) };
}

function clientApp(state) {
  return acp
    .client({ name: "fido-test-client" })
    .onNotification(acp.methods.client.session.update, async ({ params, agent }) => {
      log({ type: "update", sessionId: params.sessionId, update: params.update });
      const child = params.sessionId !== state.session;
      // Once the child's first tool call completed (it asked the model
      // again, and that request stalls): cancel that child.
      const done = params.update.sessionUpdate === "tool_call_update" && params.update.status === "completed";
      if (scenario.subagents === "cancel" && child && done) {
        if (!state.cancelledChildren) state.cancelledChildren = new Set();
        if (!state.cancelledChildren.has(params.sessionId)) {
          state.cancelledChildren.add(params.sessionId);
          log({ type: "cancel_child_sent", sessionId: params.sessionId });
          await agent.notify(acp.methods.agent.session.cancel, { sessionId: params.sessionId });
        }
      }
    })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params, agent }) => {
      log({ type: "permission", params });
      if (scenario.permission === "cancel") {
        await agent.notify(acp.methods.agent.session.cancel, { sessionId: params.sessionId });
        return { outcome: { outcome: "cancelled" } };
      }
      return { outcome: { outcome: "selected", optionId: scenario.permission ?? "allow_once" } };
    })
    .onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
      log({ type: "read", params });
      const relative = path.relative(scenario.cwd, params.path);
      const text = (scenario.buffers ?? {})[relative];
      if (text === undefined) throw new Error(`no buffer of ${params.path}`);
      return { content: text };
    })
    .onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
      log({ type: "write", params });
      const relative = path.relative(scenario.cwd, params.path);
      scenario.buffers = { ...(scenario.buffers ?? {}), [relative]: params.content };
      return {};
    });
}

async function call(ctx, method, params) {
  try {
    const result = await ctx.request(method, params);
    log({ type: "response", method, result });
    return result;
  } catch (err) {
    log({ type: "error", method, code: err.code, message: err.message });
    return undefined;
  }
}

async function runSteps(steps, state) {
  const fido = startFido();
  const closing = clientApp(state).connectWith(fido.stream, async (ctx) => {
    await call(ctx, acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {
        ...(unstable ? { subagents: {} } : {}),
        ...(scenario.buffers || scenario.writes
          ? { fs: { readTextFile: !!scenario.buffers, writeTextFile: !!scenario.writes } }
          : {}),
      },
    });
    while (steps.length > 0) {
      const step = steps.shift();
      if (step.do === "restart" || step.do === "quit") return step.do;
      await runStep(ctx, step, state);
    }
    return "quit";
  });
  const next = await closing;
  fido.child.stdin.end();
  report.exits.push(await fido.exited);
  return next;
}

async function runStep(ctx, step, state) {
  switch (step.do) {
    case "new": {
      const result = await call(ctx, acp.methods.agent.session.new, {
        cwd: scenario.cwd,
        mcpServers: step.mcpServers ?? [],
      });
      if (result) state.session = result.sessionId;
      break;
    }
    case "prompt": {
      const sessionId = step.session ?? state.session;
      const prompt = step.prompt ?? [{ type: "text", text: step.text }];
      let timer;
      if (step.cancelAfterMs !== undefined) {
        timer = setTimeout(() => {
          log({ type: "cancel_sent", at: Date.now() });
          ctx.notify(acp.methods.agent.session.cancel, { sessionId });
        }, step.cancelAfterMs);
      }
      await call(ctx, acp.methods.agent.session.prompt, { sessionId, prompt });
      log({ type: "prompt_answered", at: Date.now() });
      clearTimeout(timer);
      break;
    }
    case "list":
      await call(ctx, acp.methods.agent.session.list, { cwd: scenario.cwd });
      break;
    case "mode":
      await call(ctx, acp.methods.agent.session.setMode, {
        sessionId: state.session,
        modeId: step.mode,
      });
      break;
    case "config":
      await call(ctx, acp.methods.agent.session.setConfigOption, {
        sessionId: state.session,
        configId: step.id,
        value: step.value,
      });
      break;
    case "load": {
      const sessionId = step.id === "$session" ? state.session : step.id;
      await call(ctx, acp.methods.agent.session.load, {
        sessionId,
        cwd: scenario.cwd,
        mcpServers: [],
      });
      break;
    }
    default:
      throw new Error(`unknown step ${step.do}`);
  }
}

const steps = [...scenario.steps];
const state = {};
while ((await runSteps(steps, state)) === "restart") {}
process.stdout.write(JSON.stringify(report) + "\n");
