//! The sandbox: what a script cannot reach, and the globals replaced so that what it can reach
//! is the run's.
//!
//! - **No files, no network, no modules**: QuickJS's core has none of them (they live in
//!   quickjs-libc, which rquickjs does not load), no module loader is set (so `import()` fails),
//!   and there is no `require`. Nothing is added here for them: they are absent.
//! - **No timers**: the core has no `setTimeout`; promise callbacks a hook queues run before
//!   the call returns, under its deadline (runtime.rs), so nothing outlives a call.
//! - **The run's clock**: `Date.now()`, `new Date()` and `performance.now()` (which quickjs-ng
//!   has) read [`crate::Clock`], not the machine's.
//! - **Seeded randomness**: `Math.random` is the runtime's seeded stream (stdlib.rs).
//! - **No code from strings**: `eval` is removed and the `Function` constructors (also reached as
//!   `(function(){}).constructor`, and the generator and async kinds) throw. Why: it adds no
//!   capability a script lacks, but it is the one way text that arrived from the network (a
//!   response body) could become code, and removing it costs a few property writes once per
//!   runtime. (QuickJS's own compilation of the scripts does not go through these globals.)
//!
//! Limits (time, memory, stack) are set on the runtime itself (runtime.rs).

use std::rc::Rc;

use rquickjs::{Ctx, Function};

use crate::runtime::Shared;

/// Runs once per runtime, before the scripts, with the run's clock as `now`.
const PRELUDE: &str = r#"
(function (now) {
  "use strict";
  const RealDate = globalThis.Date;
  const RunDate = function Date(...args) {
    if (new.target === undefined) return new RealDate(now()).toString();
    return Reflect.construct(RealDate, args.length === 0 ? [now()] : args, new.target);
  };
  RunDate.prototype = RealDate.prototype;
  RunDate.now = function now_() { return now(); };
  RunDate.parse = RealDate.parse;
  RunDate.UTC = RealDate.UTC;
  Object.defineProperty(RealDate.prototype, "constructor", { value: RunDate, writable: true, configurable: true });
  Object.defineProperty(globalThis, "Date", { value: RunDate, writable: true, configurable: true });
  // quickjs-ng's performance reads the machine's clocks (timeOrigin its wall clock): the run's.
  const origin = now();
  const performance = { timeOrigin: origin, now: function now_() { return now() - origin; } };
  Object.defineProperty(globalThis, "performance", { value: Object.freeze(performance), writable: true, configurable: true });

  const refuse = function Function() {
    throw new EvalError("scripts cannot compile code from strings (eval and Function are off in perfops)");
  };
  refuse.prototype = Function.prototype;
  const kinds = [function () {}, function* () {}, async function () {}, async function* () {}];
  for (const f of kinds) {
    Object.defineProperty(Object.getPrototypeOf(f), "constructor", { value: refuse, writable: false, configurable: false });
  }
  Object.defineProperty(globalThis, "Function", { value: refuse, writable: true, configurable: true });
  delete globalThis.eval;
})
"#;

/// Installs the clock and the string-eval ban.
pub(crate) fn install<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>) -> rquickjs::Result<()> {
    let clock = shared.clock;
    let now = Function::new(ctx.clone(), move || clock.now_ms())?.with_name("now")?;
    let prelude: Function = ctx.eval(PRELUDE)?;
    prelude.call::<_, ()>((now,))?;
    Ok(())
}
