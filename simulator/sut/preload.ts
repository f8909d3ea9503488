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
