// The sidecar: serves a thatch checkout's own ChatStore and ChatPoller to one
// harness process over JSON lines (stdin: requests and callback answers;
// stdout: replies and callbacks). One request at a time, answered in order; a
// request that comes while the harness answers a callback is served at once,
// nested, as an in-process call made from inside the callback would be.
//
//   bun --preload ./preload.ts ./sidecar.ts CHECKOUT
//
// Requests: {"id", "op", "now", ...}; replies: {"re": id, "ok": value} or
// {"re": id, "error": {name, message, code}}, each with the lines the real code
// logged while serving it ("log"), since the real poller reports a failed cycle
// on the console only. During a poll the real poller calls `deliver`; the
// sidecar asks the harness ({"cb": k, "fn": "deliver", "args"}) and waits for
// {"cb_re": k} before it goes on. The gate (`canDeliver`) is answered from the
// map the poll request carries: 0.1.41's gate is synchronous, so it cannot wait
// for a pipe, and the harness's gate has no side effects. Statement boundaries
// (for crash points and pauses) travel on a channel of their own: preload.ts.

import { Database } from "bun:sqlite";

const sim = (globalThis as any).__thatchSim;
const checkout = process.argv[2];
const chat: any = await import(`${checkout}/src/chat.ts`);

let logged: string[] = [];
const keep = (...parts: unknown[]) => {
  logged.push(parts.map((p) => (p instanceof Error ? `${p.name}: ${p.message}` : String(p))).join(" "));
};
console.error = keep;
console.warn = keep;
console.log = keep;
console.info = keep;

function send(msg: unknown): void {
  process.stdout.write(JSON.stringify(msg) + "\n");
}

let nextCallback = 0;
const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

function askHarness(fn: string, args: unknown[]): Promise<unknown> {
  const cb = ++nextCallback;
  send({ cb, fn, args });
  return new Promise((resolve, reject) => waiting.set(cb, { resolve, reject }));
}

let db: Database | null = null;
let store: any = null;
let poller: any = null;
let hosted: string[] = [];
let gate: Record<string, boolean> = {};

function describe() {
  const constants: Record<string, unknown> = {};
  const functions: string[] = [];
  for (const [name, value] of Object.entries(chat)) {
    if (typeof value === "number" || typeof value === "string") constants[name] = value;
    else if (typeof value === "function" && !/^class\b/.test(Function.prototype.toString.call(value))) functions.push(name);
  }
  const methods = (cls: any) =>
    cls ? Object.getOwnPropertyNames(cls.prototype).filter((m) => m !== "constructor") : [];
  return {
    exports: Object.keys(chat).sort(),
    constants,
    functions: functions.sort(),
    store: methods(chat.ChatStore),
    poller: methods(chat.ChatPoller),
  };
}

function open(req: any) {
  sim.seedRandom(req.seed >>> 0);
  db = new Database(req.db);
  // The connection settings of the real ThatchDB.
  db.run("PRAGMA journal_mode = WAL");
  db.run(`PRAGMA busy_timeout = ${Number(req.busyTimeout) | 0}`);
  db.run(`PRAGMA foreign_keys = ${req.foreignKeys ? "ON" : "OFF"}`);
  store = new chat.ChatStore(db);
  const pollerStore = {
    heartbeatChatSessions: (ids: string[]) => storeCall("heartbeat", [ids]),
    pendingChatNotifications: (ids: string[], cutoff: string) => storeCall("pendingNotifications", [ids, cutoff]),
    markChatDelivered: (ids: number[]) => storeCall("markDelivered", [ids]),
  } as Record<string, unknown>;
  // The later poller prunes through this one when it exists (0.1.41 has no prune).
  if (typeof store.pruneStaleAuto === "function") {
    pollerStore.pruneStaleChatAuto = (cutoff: string) => storeCall("pruneStaleAuto", [cutoff]);
  }
  poller = new chat.ChatPoller({
    ...(req.pollerOptions ?? {}),
    store: pollerStore,
    hostedSessions: () => hosted,
    deliver: (sessionID: string, senders: string[], count: number) => askHarness("deliver", [sessionID, senders, count]),
    canDeliver: (sessionID: string) => gate[sessionID] === true,
  });
  return null;
}

// Whether the request being served wants its statements reported (preload.ts: crash points and pauses).
let reportStatements = false;

/** One ChatStore method, its statements numbered from 1 as one call. */
function storeCall(method: string, args: unknown[]): unknown {
  const fn = store[method];
  if (typeof fn !== "function") throw new Error(`ChatStore has no method ${method}`);
  sim.beginCall(method, reportStatements);
  try {
    return fn.apply(store, args);
  } finally {
    sim.endCall();
  }
}

function lastInsertRowid(): number {
  return (db!.query("SELECT last_insert_rowid() AS id").get() as any).id;
}

async function serve(req: any): Promise<unknown> {
  if (typeof req.now === "number") sim.setVirtualNow(req.now);
  reportStatements = req.hooks === true;
  switch (req.op) {
    case "describe":
      return describe();
    case "open":
      return open(req);
    case "call": {
      const value = storeCall(req.method, req.args ?? []);
      return req.rowid ? { value: value ?? null, rowid: lastInsertRowid() } : (value ?? null);
    }
    case "fn": {
      const fn = chat[req.name];
      if (typeof fn !== "function") throw new Error(`the checkout's chat.ts exports no function ${req.name}`);
      return (await fn(...(req.args ?? []))) ?? null;
    }
    case "poll":
    case "deliverPending":
      hosted = req.hosted ?? [];
      gate = req.gate ?? {};
      await poller[req.op]();
      return null;
    case "close":
      poller?.dispose?.();
      db?.close();
      db = null;
      return null;
    default:
      throw new Error(`unknown request ${req.op}`);
  }
}

const queue: any[] = [];
let serving: Promise<void> | null = null;

function drain(): Promise<void> {
  serving ??= serveQueue().finally(() => (serving = null));
  return serving;
}

async function serveOne(req: any): Promise<void> {
  const outer = logged;
  logged = [];
  try {
    const value = await serve(req);
    send({ re: req.id, ok: value, log: logged });
  } catch (err: any) {
    const error = { name: String(err?.name ?? "Error"), message: String(err?.message ?? err), code: err?.code ?? null };
    send({ re: req.id, error, log: logged });
  }
  logged = outer;
  if (req.op === "close") process.exit(0);
}

async function serveQueue(): Promise<void> {
  while (queue.length > 0) await serveOne(queue.shift());
}

for await (const line of console) {
  if (!line.trim()) continue;
  const msg = JSON.parse(line);
  if (msg.cb_re !== undefined) {
    const w = waiting.get(msg.cb_re);
    waiting.delete(msg.cb_re);
    if (w) msg.error ? w.reject(new Error(msg.error)) : w.resolve(msg.ok ?? null);
    continue;
  }
  if (waiting.size > 0) {
    // The harness calls the store again while it answers a callback (a wake prompt that makes the
    // host register or read): serve it now, nested, as an in-process call would be. The request
    // waiting for the callback stays suspended until its answer comes.
    void serveOne(msg);
    continue;
  }
  queue.push(msg);
  void drain();
}
// stdin closed: the harness is done (it closes stdin once every reply came) or gone (then nothing it
// asked may still run).
process.exit(0);
