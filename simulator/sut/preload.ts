import { Database } from "bun:sqlite";
import { readSync, writeSync } from "node:fs";

// Preloaded (bun --preload) before a thatch checkout's code: the checkout reads
// time and randomness only through the globals replaced here, so the harness
// decides both. Virtual time: every request carries the harness's frozen
// clock, and `Date.now()`, `new Date()` and `Date()` all read it. Randomness:
// `Math.random` is a seeded generator (the real code draws pool names with
// it), reseeded once at start from the run's seed.

const RealDate = Date;
let virtualNowMs = 0;

export function setVirtualNow(ms: number): void {
  virtualNowMs = ms;
}

class VirtualDate extends RealDate {
  constructor(...args: any[]) {
    if (args.length === 0) super(virtualNowMs);
    else super(...(args as [any]));
  }
  static now(): number {
    return virtualNowMs;
  }
}
// `Date()` called as a function returns a string of now, not of the wall clock.
const DateFacade = new Proxy(VirtualDate, {
  apply() {
    return new RealDate(virtualNowMs).toString();
  },
});
(globalThis as any).Date = DateFacade;

// sfc32: small, fast, and the same sequence for the same seed on every machine.
let a = 0, b = 0, c = 0, d = 0;
export function seedRandom(seed: number): void {
  a = 0x9e3779b9; b = 0x243f6a88; c = 0xb7e15162; d = seed >>> 0;
  for (let i = 0; i < 15; i++) Math.random();
}
Math.random = function random(): number {
  a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
  let t = (a + b) | 0;
  a = b ^ (b >>> 9);
  b = (c + (c << 3)) | 0;
  c = (c << 21) | (c >>> 11);
  d = (d + 1) | 0;
  t = (t + d) | 0;
  c = (c + t) | 0;
  return (t >>> 0) / 4294967296;
};
seedRandom(0);
(globalThis as any).__thatchSim = { setVirtualNow, seedRandom };

// Statement boundaries, for crash points and interleavings at any statement of a store call. While
// the request being served asks for them, every statement the checkout runs (each `run`, each
// execution of a `query`/`prepare` statement, and a transaction's BEGIN and COMMIT or ROLLBACK) is
// reported to the harness just before and just after it runs, on a channel of its own (two pipes
// whose fds THATCH_SIM_HOOK_FDS names), and waits for the harness's go. The harness may never
// answer: a crash there kills it, and this process with it; a pause answers once it is resumed.

const hookFds = (process.env.THATCH_SIM_HOOK_FDS ?? "").split(",").filter(Boolean).map(Number);
let reporting = false;
let currentCall = "";
let statementNo = 0;

export function beginCall(call: string, report: boolean): void {
  currentCall = call;
  statementNo = 0;
  reporting = report && hookFds.length === 2;
}

export function endCall(): void {
  reporting = false;
}

const one = Buffer.alloc(1);

function waitForGo(): void {
  // The answer is one short line; read it byte by byte so nothing after it is taken. The channel's
  // end means the harness died here (a crash before this statement): the statement must not run.
  for (;;) {
    if (readSync(hookFds[1], one, 0, 1, null) !== 1) process.kill(process.pid, "SIGKILL");
    if (one[0] === 10) return;
  }
}

function report(db: Database, sql: string, when: "before" | "after"): void {
  if (!reporting) return;
  if (when === "before") statementNo++;
  const line = JSON.stringify({ call: currentCall, n: statementNo, sql, when, inTx: db.inTransaction });
  writeSync(hookFds[0], line + "\n");
  waitForGo();
}

function around<T>(db: Database, sql: string, run: () => T): T {
  report(db, sql, "before");
  const value = run();
  report(db, sql, "after");
  return value;
}

const STATEMENT_CALLS = ["all", "get", "run", "values"];

function watchStatement(db: Database, sql: string, statement: any): any {
  if (statement.__thatchSim) return statement;
  for (const name of STATEMENT_CALLS) {
    const original = statement[name];
    if (typeof original !== "function") continue;
    statement[name] = (...args: unknown[]) => around(db, sql, () => original.apply(statement, args));
  }
  statement.__thatchSim = true;
  return statement;
}

const proto: any = Database.prototype;
for (const name of ["query", "prepare"]) {
  const original = proto[name];
  proto[name] = function (this: Database, sql: string, ...rest: unknown[]) {
    return watchStatement(this, sql, original.call(this, sql, ...rest));
  };
}
const originalRun = proto.run;
proto.run = function (this: Database, sql: string, ...rest: unknown[]) {
  return around(this, sql, () => originalRun.call(this, sql, ...rest));
};
const originalTransaction = proto.transaction;
proto.transaction = function (this: Database, fn: (...args: unknown[]) => unknown) {
  const db = this;
  // bun runs BEGIN, the body, then COMMIT (ROLLBACK when the body throws): report each edge.
  const body = function (this: unknown, ...args: unknown[]) {
    report(db, "BEGIN", "after");
    const value = fn.apply(this, args);
    report(db, "COMMIT", "before");
    return value;
  };
  const inner = originalTransaction.call(this, body);
  return function (this: unknown, ...args: unknown[]) {
    report(db, "BEGIN", "before");
    try {
      const value = inner.apply(this, args);
      report(db, "COMMIT", "after");
      return value;
    } catch (err) {
      if (!db.inTransaction) report(db, "ROLLBACK", "after");
      throw err;
    }
  };
};
(globalThis as any).__thatchSim.beginCall = beginCall;
(globalThis as any).__thatchSim.endCall = endCall;
