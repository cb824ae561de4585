//! One worker's JavaScript runtime: [`Runtime`] (a QuickJS runtime and context with the
//! scripts evaluated, the sandbox and the standard library installed), its [`Limits`], the
//! run's [`Clock`], and the calls of the three kinds of hook plus `setup`.
//!
//! A call, in order (`invoke`):
//!
//! ```text
//!   deadline = now + call_time ──> globals vars / arrival / row from the FlowState
//!        │                               │
//!        │            hook(arg) ── interrupt handler polls the deadline (QuickJS asks it
//!        │               │         every ~10,000 bytecode steps) ──> Timeout
//!        │               ├── throws ──> Exception (its place) / OutOfMemory (runtime rebuilt)
//!        │               └── returns ──> pending jobs run (promise callbacks, same deadline)
//!        │                                 ──> return value read (BadReturn if misshapen)
//!        └── spent += elapsed                  ──> vars copied back into the FlowState
//!                                                  (only if the call changed them)
//! ```
//!
//! What it owns: the limits and how each failure becomes a typed [`ScriptError`], the copy of
//! a flow's state into JS and back, the time spent in JS. What it does not: the library's
//! functions (stdlib.rs), the sandbox's replacements of globals (sandbox.rs), the choice of
//! which hook to call (the engine).
//!
//! Why copy `vars` in and out on every call instead of a live proxy: a flow instance's state
//! outlives no call in JS (another flow instance's hook runs next on the same runtime), a few
//! saved values cost a few hundred ns to copy, and the copy makes "a hook that throws saves
//! nothing" true by construction.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rquickjs::function::Args;
use rquickjs::object::Property;
use rquickjs::{Coerced, Ctx, FromJs, Function, Object, Persistent, Type, Value};

use crate::error::{Place, ScriptError, loop_after, one_line, place_from_stack};
use crate::exchange::{FlowState, Next, RequestParts, ResponseView, StepOutcome, Verdict};
use crate::scripts::{Hook, Scripts, SourceFile};
use crate::stdlib::{Given, Keys, Names};
use crate::{sandbox, stdlib};

/// The bounds of one runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest one call may run (the hook and the promise callbacks it queued); past it
    /// the call is interrupted with [`ScriptError::Timeout`].
    pub call_time: Duration,
    /// The most memory the runtime's heap may hold (QuickJS's own accounting of its
    /// allocations); past it a call fails with [`ScriptError::OutOfMemory`].
    pub memory_bytes: usize,
}

impl Default for Limits {
    /// 100 ms a call (a signing hook takes a few µs: this only catches runaway loops) and
    /// 64 MiB a runtime (a runtime with a small script holds about 200 KiB).
    fn default() -> Self {
        Limits { call_time: Duration::from_millis(100), memory_bytes: 64 << 20 }
    }
}

/// JS stack allowed to a call. The engine's worker threads have 2 MiB stacks (tokio's
/// default); QuickJS checks its C stack against this bound and throws a catchable
/// `RangeError` (an [`ScriptError::Exception`]) on deep recursion instead of overflowing.
const STACK_BYTES: usize = 512 << 10;

/// The time `Date.now()` and `new Date()` read: the run's clock, not the machine's wall clock,
/// so that scripts see the same time the run's results are dated with.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch_ms: f64,
    start: Option<Instant>,
}

impl Clock {
    /// The run's clock: `wall` was the time at the monotonic instant `start`; later readings
    /// add the monotonic time since (a wall clock stepped during the run does not move it).
    pub fn run(wall: SystemTime, start: Instant) -> Clock {
        let epoch_ms = wall.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0);
        Clock { epoch_ms, start: Some(start) }
    }

    /// A clock that always reads `epoch_ms` milliseconds since 1970 (tests, `check`).
    pub fn frozen(epoch_ms: u64) -> Clock {
        Clock { epoch_ms: epoch_ms as f64, start: None }
    }

    /// Milliseconds since 1970, whole (as `Date.now()` gives them).
    pub(crate) fn now_ms(&self) -> f64 {
        let since = self.start.map_or(0.0, |s| s.elapsed().as_secs_f64() * 1000.0);
        (self.epoch_ms + since).floor()
    }
}

/// The seed of one runtime's random stream (`Math.random`, `perfops.random`, `randomInt`,
/// `uuid`), from the run's seed, the shard and the worker.
///
/// Why the streams are disjoint: the generator (fastrand's wyrand) walks a single cycle of
/// 2^64 states by a fixed odd step, and each seed is a starting point on it. The mix below
/// (SplitMix64's finaliser, a bijection of u64) gives every (shard, worker) pair a distinct,
/// scattered start, so two runtimes drawing n values each overlap only if their starts lie
/// within n steps of each other: probability 2n/2^64, about 10^-10 for a billion draws.
/// The same (run seed, shard, worker) always draws the same stream.
pub fn stream_seed(run_seed: u64, shard: u32, worker: u32) -> u64 {
    let mut z = run_seed ^ ((u64::from(shard) << 32) | u64::from(worker));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What the native functions of a runtime share with it (the runtime is single-threaded, so
/// cells, not locks).
pub(crate) struct Shared {
    /// When the current call must stop.
    deadline: Cell<Instant>,
    /// Whether the interrupt handler stopped the current call (tells a timeout from a throw).
    interrupted: Cell<bool>,
    pub(crate) rng: RefCell<fastrand::Rng>,
    pub(crate) clock: Clock,
    /// What `console.log` and its kin wrote, until the caller takes it.
    pub(crate) log: RefCell<Log>,
}

/// `console` output kept for the caller (`perfops run --debug` shows it), bounded: a script that
/// logs on every request must not grow the generator's memory.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub(crate) lines: Vec<String>,
    pub(crate) dropped: u64,
}

/// Lines kept between two [`Runtime::take_log`]s; later ones are counted, not kept.
pub const LOG_LINES: usize = 100;

/// The engine objects of one runtime. Field order is drop order: the saved functions must go
/// before the context and the runtime that hold them.
struct Engine {
    hooks: Vec<Persistent<Function<'static>>>,
    /// `row` for a flow instance without feeders: one frozen object, not one per call.
    no_rows: Persistent<Object<'static>>,
    /// One live block of each of the heap's small size classes, never read (see [`BALLAST`]).
    _ballast: Persistent<Value<'static>>,
    names: Names,
    shapes: Shapes,
    ctx: rquickjs::Context,
    rt: rquickjs::Runtime,
}

/// A worker's JavaScript runtime. Not `Send`: build one on each worker thread (QuickJS
/// runtimes are single-threaded); build it from the shared [`Scripts`].
pub struct Runtime {
    scripts: Scripts,
    limits: Limits,
    shared: Rc<Shared>,
    engine: Engine,
    spent: Duration,
    rebuilt: u64,
}

/// A runtime used only to check scripts and list their functions.
pub(crate) struct Probe;

impl Probe {
    /// Evaluates `files` and returns the functions they define, or every file's error.
    pub(crate) fn functions(
        files: &[SourceFile],
        limits: Limits,
        clock: Clock,
    ) -> Result<Vec<String>, Vec<ScriptError>> {
        let shared = Rc::new(Shared::new(0, clock));
        let (rt, ctx) = engine(limits, &shared).map_err(|e| vec![e])?;
        let result = ctx.with(|ctx| {
            let before: Vec<String> = ctx.globals().keys::<String>().filter_map(Result::ok).collect();
            let errors = evaluate(&ctx, &shared, files);
            if !errors.is_empty() {
                return Err(errors);
            }
            let globals = ctx.globals();
            let mut found = Vec::new();
            for key in globals.keys::<String>().filter_map(Result::ok) {
                if before.contains(&key) {
                    continue;
                }
                if let Ok(v) = globals.get::<_, Value>(key.as_str())
                    && v.is_function()
                {
                    found.push(key);
                }
            }
            Ok(found)
        });
        drop(ctx);
        drop(rt);
        result
    }
}

impl Shared {
    fn new(seed: u64, clock: Clock) -> Shared {
        Shared {
            deadline: Cell::new(Instant::now() + Duration::from_secs(3600)),
            interrupted: Cell::new(false),
            rng: RefCell::new(fastrand::Rng::with_seed(seed)),
            clock,
            log: RefCell::new(Log::default()),
        }
    }
}

/// A QuickJS runtime and context with limits, sandbox and library, no scripts yet.
fn engine(limits: Limits, shared: &Rc<Shared>) -> Result<(rquickjs::Runtime, rquickjs::Context), ScriptError> {
    let fail = |e: rquickjs::Error| ScriptError::Compile {
        at: None,
        message: format!("the script engine could not start: {e}"),
    };
    let rt = rquickjs::Runtime::new().map_err(fail)?;
    rt.set_memory_limit(limits.memory_bytes);
    rt.set_max_stack_size(STACK_BYTES);
    let polled = Rc::clone(shared);
    rt.set_interrupt_handler(Some(Box::new(move || {
        let over = Instant::now() >= polled.deadline.get();
        if over {
            polled.interrupted.set(true);
        }
        over
    })));
    let ctx = rquickjs::Context::full(&rt).map_err(fail)?;
    ctx.with(|ctx| -> Result<(), ScriptError> {
        stdlib::install(&ctx, shared).map_err(|e| caught(&ctx, e, "the standard library"))?;
        sandbox::install(&ctx, shared).map_err(|e| caught(&ctx, e, "the sandbox"))?;
        Ok(())
    })?;
    Ok((rt, ctx))
}

/// Evaluates each file in order under the call limit; returns each file's error.
fn evaluate(ctx: &Ctx<'_>, shared: &Shared, files: &[SourceFile]) -> Vec<ScriptError> {
    let mut errors = Vec::new();
    for file in files {
        shared.interrupted.set(false);
        shared.deadline.set(Instant::now() + Limits::default().call_time);
        let mut options = rquickjs::context::EvalOptions::default();
        options.global = true;
        options.strict = false;
        options.filename = Some(file.name.clone());
        let r: rquickjs::Result<()> = ctx.eval_with_options(file.text.as_bytes(), options);
        if let Err(e) = r {
            let at_top = caught(ctx, e, "top-level code");
            errors.push(match at_top {
                ScriptError::Exception { at, .. } if shared.interrupted.get() => {
                    ScriptError::Compile { at, message: "top-level code ran past the call time limit".to_string() }
                }
                ScriptError::Exception { at, message, .. } => ScriptError::Compile { at, message },
                other => ScriptError::Compile { at: None, message: format!("{}: {other}", file.name) },
            });
        }
    }
    shared.deadline.set(Instant::now() + Duration::from_secs(3600));
    errors
}

/// The [`ScriptError`] of an engine error: the exception pending in `ctx` if there is one.
/// (Timeouts are told apart by the caller, which knows whether the interrupt handler fired.)
fn caught(ctx: &Ctx<'_>, e: rquickjs::Error, function: &str) -> ScriptError {
    let function = function.to_string();
    match e {
        rquickjs::Error::Exception => {
            let value = ctx.catch();
            let (message, at) = describe(ctx, &value);
            // QuickJS throws `InternalError: out of memory`, or `null` when it cannot even
            // allocate that error (JS_ThrowError2). A script's own `throw null` reads the same
            // and costs a rebuilt runtime: harmless.
            if value.is_null() || message == "InternalError: out of memory" {
                // The limit is filled in by the caller, which knows it.
                return ScriptError::OutOfMemory { function, limit_bytes: 0 };
            }
            ScriptError::Exception { function, at, message }
        }
        rquickjs::Error::Allocation => ScriptError::OutOfMemory { function, limit_bytes: 0 },
        rquickjs::Error::FromJs { from, to, message } => ScriptError::BadReturn {
            function,
            message: format!("expected {to}, got {from}{}", message.map(|m| format!(" ({m})")).unwrap_or_default()),
        },
        other => ScriptError::Exception { function, at: None, message: one_line(&other.to_string()) },
    }
}

/// A thrown value as `name: message` and its place: an `Error` by its fields and stack,
/// anything else as JS writes it.
fn describe<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> (String, Option<Place>) {
    if let Some(obj) = value.as_object() {
        if let Some(exception) = value.as_exception() {
            let name: Option<String> = obj.get("name").ok();
            let message = exception.message().unwrap_or_default();
            let text = match name {
                Some(n) if !n.is_empty() => format!("{n}: {message}"),
                _ => message,
            };
            let mut at = exception.stack().as_deref().and_then(place_from_stack);
            if at.is_none() {
                // A syntax error has no frame of its own: its place is in its fields.
                let file: Option<String> = obj.get("fileName").ok();
                let line: Option<u32> = obj.get("lineNumber").ok();
                let column: Option<u32> = obj.get("columnNumber").ok();
                if let (Some(file), Some(line)) = (file, line) {
                    at = Some(Place { file, line, column: column.unwrap_or(1) });
                }
            }
            return (one_line(&text), at);
        }
        if let Ok(Some(json)) = ctx.json_stringify(value.clone())
            && let Ok(text) = json.to_string()
        {
            return (one_line(&format!("threw {text}")), None);
        }
    }
    let text =
        Coerced::<String>::from_js(ctx, value.clone()).map(|c| c.0).unwrap_or_else(|_| value.type_name().to_string());
    (one_line(&text), None)
}

impl Runtime {
    /// Builds a runtime for one worker: the sandbox, the library, then the scripts' top-level
    /// code (once). `seed` seeds its random stream: give each worker of each shard its own,
    /// from [`stream_seed`].
    pub fn new(scripts: &Scripts, limits: Limits, seed: u64, clock: Clock) -> Result<Runtime, ScriptError> {
        let shared = Rc::new(Shared::new(seed, clock));
        let engine = build(scripts, limits, &shared)?;
        Ok(Runtime { scripts: scripts.clone(), limits, shared, engine, spent: Duration::ZERO, rebuilt: 0 })
    }

    /// Time spent inside JS since the last [`Runtime::take_spent`]: the scripts' share of
    /// this worker's CPU. (It is the calls' elapsed time on the worker's own thread: a call
    /// never waits on I/O, so that is CPU time, at ~25 ns a reading instead of a system call.)
    pub fn take_spent(&mut self) -> Duration {
        std::mem::take(&mut self.spent)
    }

    /// What the scripts wrote with `console.log` (and `info`, `warn`, `error`, `debug`) since
    /// the last call of this, at most [`LOG_LINES`] lines of at most
    /// [`MESSAGE_MAX`](crate::error::MESSAGE_MAX) characters, and how many lines were dropped
    /// past that. The library prints nothing itself; a script may log a secret it computed, so
    /// show these only where a person asked for them (`--debug`).
    pub fn take_log(&mut self) -> (Vec<String>, u64) {
        let log = std::mem::take(&mut *self.shared.log.borrow_mut());
        (log.lines, log.dropped)
    }

    /// How many times the runtime was rebuilt after running out of memory.
    pub fn rebuilt(&self) -> u64 {
        self.rebuilt
    }

    /// The scripts this runtime runs (for hooks' names).
    pub fn scripts(&self) -> &Scripts {
        &self.scripts
    }

    /// The heap QuickJS holds now, in bytes.
    pub fn memory_bytes(&self) -> u64 {
        u64::try_from(self.engine.rt.memory_usage().malloc_size).unwrap_or(0)
    }

    /// Calls a request hook: `hook(req)` may change `request` (in place or by returning a new
    /// request object) and save into `state.vars`. After an error `request` may hold part of
    /// what the hook did: it is not to be sent.
    pub fn before_request(
        &mut self,
        hook: Hook,
        state: &mut FlowState,
        request: &mut RequestParts,
    ) -> Result<(), ScriptError> {
        // Read to build `req`, then changed in place by what the hook did.
        let request = RefCell::new(request);
        self.invoke(
            hook,
            state,
            |ctx, keys| {
                stdlib::request_to_js(ctx, keys, &request.borrow()).map(|(obj, given)| (Value::from(obj), given))
            },
            |ctx, keys, ret, arg, given| {
                let returned = ret.type_name();
                let obj = match ret.type_of() {
                    Type::Undefined => arg.into_object(),
                    Type::Object => ret.into_object(),
                    _ => None,
                };
                let Some(obj) = obj else {
                    return Err(format!("a request hook returns nothing or a request object, not {returned}"));
                };
                stdlib::request_from_js(ctx, keys, &obj, &mut request.borrow_mut(), &given)
            },
        )?;
        // The headers' shapes, when each name is once (a repeated name's fields are one
        // property: the sequence would not be the object's).
        let headers = &request.borrow().headers;
        let names = headers.iter().map(|(name, _)| name.as_str());
        if !self.engine.shapes.knows(names.clone())
            && !headers.iter().enumerate().any(|(i, (name, _))| headers[..i].iter().any(|(n, _)| n == name))
        {
            self.engine.shapes.see(&self.engine.ctx, names);
        }
        Ok(())
    }

    /// Calls a response hook: `hook(res)` reads the response, may save into `state.vars`,
    /// and decides success.
    pub fn after_response(
        &mut self,
        hook: Hook,
        state: &mut FlowState,
        response: ResponseView<'_>,
    ) -> Result<Verdict, ScriptError> {
        self.invoke(
            hook,
            state,
            |ctx, _| stdlib::response_to_js(ctx, response).map(|obj| (Value::from(obj), Given::default())),
            |_ctx, _, ret, _arg, _| verdict(ret),
        )
    }

    /// Runs a `script:` step: `hook()` computes, saves into `state.vars`, and says where the
    /// flow goes.
    pub fn step(&mut self, hook: Hook, state: &mut FlowState) -> Result<StepOutcome, ScriptError> {
        self.invoke(
            hook,
            state,
            |ctx, _| Ok((Value::new_undefined(ctx.clone()), Given::default())),
            |_ctx, _, ret, _arg, _| {
                let next = match ret.type_of() {
                    Type::Undefined => Next::Continue,
                    Type::String => Next::Goto(ret.as_string().and_then(|s| s.to_string().ok()).unwrap_or_default()),
                    Type::Bool if ret.as_bool() == Some(false) => Next::End,
                    _ => {
                        return Err(format!(
                            "a step returns nothing (go on), a step's name (go there) or false (end the flow), not {}",
                            ret.type_name()
                        ));
                    }
                };
                Ok(StepOutcome { next })
            },
        )
    }

    /// Runs the setup hook once: `hook()` saves into `state.vars` the values every flow
    /// starts with. Its return value is ignored.
    pub fn setup(&mut self, hook: Hook, state: &mut FlowState) -> Result<(), ScriptError> {
        self.invoke(
            hook,
            state,
            |ctx, _| Ok((Value::new_undefined(ctx.clone()), Given::default())),
            |_ctx, _, _ret, _arg, _| Ok(()),
        )
    }

    /// One call: the limits, the state in and out, the error's kind and place, the time.
    fn invoke<T>(
        &mut self,
        hook: Hook,
        state: &mut FlowState,
        arg: impl for<'js> FnOnce(&Ctx<'js>, &Keys<'js>) -> rquickjs::Result<(Value<'js>, Given<'js>)>,
        read: impl for<'js> FnOnce(&Ctx<'js>, &Keys<'js>, Value<'js>, Value<'js>, Given<'js>) -> Result<T, String>,
    ) -> Result<T, ScriptError> {
        // Borrowed: made a `String` only for an error (an allocation per call, else).
        let name = self.scripts.name(hook);
        let no_rows = self.engine.no_rows.clone();
        let Some(saved) = self.engine.hooks.get(hook.0 as usize).cloned() else {
            return Err(ScriptError::BadReturn {
                function: name.to_string(),
                message: "no such function in these scripts".to_string(),
            });
        };
        let started = Instant::now();
        self.shared.deadline.set(started + self.limits.call_time);
        self.shared.interrupted.set(false);
        let shared = &self.shared;
        let names = &self.engine.names;
        let result = self.engine.ctx.with(|ctx| -> Result<(T, Option<BTreeMap<String, String>>), ScriptError> {
            let err = |e: rquickjs::Error| caught(&ctx, e, name);
            let globals = ctx.globals();
            let keys = names.keys(&ctx).map_err(err)?;
            let (vars_in, values_in) = stdlib::vars_to_js(&ctx, &state.vars).map_err(err)?;
            globals.set(keys.vars.clone(), vars_in.clone()).map_err(err)?;
            globals.set(keys.arrival.clone(), state.arrival as f64).map_err(err)?;
            let row = if state.rows.is_empty() {
                no_rows.restore(&ctx).map_err(err)?
            } else {
                stdlib::rows_to_js(&ctx, &state.rows).map_err(err)?
            };
            globals.set(keys.row.clone(), row).map_err(err)?;
            let f = saved.restore(&ctx).map_err(err)?;
            let (a, given) = arg(&ctx, &keys).map_err(err)?;
            let mut args = Args::new(ctx.clone(), 1);
            args.push_arg(a.clone()).map_err(err)?;
            let ret: Value = f.call_arg(args).map_err(err)?;
            // Promise callbacks the hook queued run now, under the same deadline, so that
            // none is left to run in another flow's call (or to pile up).
            // (QuickJS leaves a job's uncatchable error, an interrupt, on the runtime; rquickjs
            // drops it, so the interrupt flag tells it, without a place.)
            while ctx.execute_pending_job() {
                if shared.interrupted.get() {
                    return Err(ScriptError::Exception {
                        function: name.to_string(),
                        at: None,
                        message: "interrupted".to_string(),
                    });
                }
            }
            if ret.is_promise() {
                return Err(ScriptError::BadReturn {
                    function: name.to_string(),
                    message: "hooks are synchronous: an async function's promise is not awaited".to_string(),
                });
            }
            let out = read(&ctx, &keys, ret, a, given)
                .map_err(|message| ScriptError::BadReturn { function: name.to_string(), message })?;
            let vars: Value = globals.get(keys.vars.clone()).map_err(err)?;
            if stdlib::vars_unchanged(&vars, &vars_in, &values_in) {
                return Ok((out, None));
            }
            let vars = stdlib::vars_from_js(&ctx, vars)
                .map_err(|message| ScriptError::BadReturn { function: name.to_string(), message })?;
            Ok((out, Some(vars)))
        });
        let result = match result {
            Ok((out, vars)) => {
                if let Some(vars) = vars {
                    state.vars = vars;
                }
                self.engine.shapes.see(&self.engine.ctx, state.vars.keys().map(String::as_str));
                Ok(out)
            }
            Err(e) => {
                let name = name.to_string();
                Err(self.classify(e, &name))
            }
        };
        self.spent += started.elapsed();
        result
    }

    /// Turns an exception that the interrupt handler caused into a timeout, fills in the
    /// memory limit, and rebuilds the runtime after an out-of-memory (a heap at its limit may
    /// fail in the next call's first allocation; a fresh one does not).
    fn classify(&mut self, e: ScriptError, name: &str) -> ScriptError {
        if self.shared.interrupted.get() {
            let at = match e {
                ScriptError::Exception { at, .. } => at,
                _ => None,
            };
            // Where it was looping, not where QuickJS last located a statement before the loop.
            let at = at.map(|at| match self.scripts.files.iter().find(|f| f.name == at.file) {
                Some(f) => loop_after(at, &f.text),
                None => at,
            });
            return ScriptError::Timeout { function: name.to_string(), limit: self.limits.call_time, at };
        }
        if let ScriptError::OutOfMemory { function, .. } = e {
            // Built before from the same scripts and limits: it builds again.
            if let Ok(engine) = build(&self.scripts, self.limits, &self.shared) {
                self.engine = engine;
                self.rebuilt += 1;
            }
            return ScriptError::OutOfMemory { function, limit_bytes: self.limits.memory_bytes };
        }
        e
    }
}

/// An `ArrayBuffer` for each block size of QuickJS's small-object allocator (its data is one
/// block of `size - 8` bytes, the header being 8), kept for the runtime's life.
///
/// Why: quickjs-ng hands out blocks of 16 to 512 bytes from 4 KiB arenas per size class and
/// frees an arena the moment its last block is freed. A class that holds nothing between calls
/// got a fresh arena (a `malloc` of 4 KiB and a loop that links its free blocks) and lost it
/// again on every call: twice a call for the 32-byte class (the atom list of an object's keys)
/// and once for the 192-byte one (a ~150-byte body's string), callgrind of `sign_bench`:
/// ~3,000 instructions of a signing call's ~69,000, in `arena_new`, `malloc` and `free`. A
/// block held in each class keeps one arena of each alive, for at most 31 x 4 KiB a runtime
/// (less: most classes hold blocks anyway).
const BALLAST: &str = "[16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 144, 160, 176, 192, \
    208, 224, 240, 256, 288, 320, 352, 384, 416, 448, 480, 512].map((size) => new ArrayBuffer(size - 8))";

/// Sequences of property names a runtime keeps the object shapes of: at most this many
/// (past it, a new sequence is not kept: its calls cost what they did before), each of at
/// most [`SHAPE_KEYS`] names.
const SHAPES: usize = 8;
/// The longest sequence of names whose shapes are kept.
const SHAPE_KEYS: usize = 16;

/// Objects that keep alive the shapes of the objects each call builds (`req`, `req.headers`,
/// `vars`, `res`): for a sequence of names, one object with the first name, one with the first
/// two, and so on.
///
/// Why: QuickJS gives each object a shape (its property names in order) and finds the shape
/// an added property leads to in a table of live shapes; a shape no object holds is freed. A
/// call's objects die with the call, so each call made every shape again, one per property
/// added (and freed them after): ~3,500 instructions of a signing call of ~60,600, ~3,200 of
/// an empty hook's ~24,300 (callgrind of `sign_bench`). With an object of each shape kept,
/// each property added finds its shape. The sequences are learnt as calls show them
/// (`req`'s and `res`'s fields when the runtime is built), a few KiB each.
struct Shapes {
    known: Vec<(Vec<String>, Vec<Persistent<Object<'static>>>)>,
}

impl Shapes {
    /// Whether the shapes of `names`, in this order, are kept (or cannot be).
    fn knows<'a>(&self, names: impl ExactSizeIterator<Item = &'a str> + Clone) -> bool {
        names.len() == 0
            || names.len() > SHAPE_KEYS
            || self.known.len() >= SHAPES
            || self.known.iter().any(|(known, _)| known.iter().map(String::as_str).eq(names.clone()))
    }

    /// Keeps the shapes of `names` in this order: defined, as a property a call sets is made
    /// (writable, enumerable, configurable), so that no setter of a script's runs.
    fn learn(&mut self, ctx: &Ctx<'_>, names: Vec<String>) -> rquickjs::Result<()> {
        let mut objects = Vec::with_capacity(names.len());
        for n in 1..=names.len() {
            let obj = Object::new(ctx.clone())?;
            for name in &names[..n] {
                obj.prop(name.as_str(), Property::from(()).writable().enumerable().configurable())?;
            }
            objects.push(Persistent::save(ctx, obj));
        }
        self.known.push((names, objects));
        Ok(())
    }

    /// Learns `names` if it does not know them; a failure only leaves them unknown.
    fn see<'a>(&mut self, ctx: &rquickjs::Context, names: impl ExactSizeIterator<Item = &'a str> + Clone) {
        if !self.knows(names.clone()) {
            let names = names.map(str::to_string).collect();
            ctx.with(|ctx| {
                if self.learn(&ctx, names).is_err() {
                    // Nothing a script did: clear what QuickJS left, if anything.
                    let _ = ctx.catch();
                }
            });
        }
    }
}

/// A runtime's engine with the scripts evaluated and every hook saved by index.
fn build(scripts: &Scripts, limits: Limits, shared: &Rc<Shared>) -> Result<Engine, ScriptError> {
    let (rt, ctx) = engine(limits, shared)?;
    type Saved = (Vec<Persistent<Function<'static>>>, Persistent<Object<'static>>, Persistent<Value<'static>>, Names);
    let (hooks, no_rows, ballast, names) = ctx.with(|ctx| -> Result<Saved, ScriptError> {
        // Before the scripts: their top-level code may replace `Array` or `ArrayBuffer`.
        let ballast: Value = ctx.eval(BALLAST).map_err(|e| caught(&ctx, e, "the runtime"))?;
        let ballast = Persistent::save(&ctx, ballast);
        if let Some(e) = evaluate(&ctx, shared, &scripts.files).into_iter().next() {
            return Err(e);
        }
        let globals = ctx.globals();
        let hooks = scripts
            .functions
            .iter()
            .map(|name| {
                let f: Function = globals.get(name.as_str()).map_err(|e| caught(&ctx, e, name))?;
                Ok(Persistent::save(&ctx, f))
            })
            .collect::<Result<_, ScriptError>>()?;
        let err = |e| caught(&ctx, e, "the runtime");
        let empty = Object::new(ctx.clone()).map_err(err)?;
        let object: Object = globals.get("Object").map_err(err)?;
        let freeze: Function = object.get("freeze").map_err(err)?;
        let empty: Object = freeze.call((empty,)).map_err(err)?;
        let names = Names::new(&ctx).map_err(err)?;
        Ok((hooks, Persistent::save(&ctx, empty), ballast, names))
    })?;
    let mut shapes = Shapes { known: Vec::with_capacity(SHAPES) };
    shapes.see(&ctx, ["method", "path", "headers", "body"].into_iter());
    shapes.see(&ctx, ["status", "headers", "body"].into_iter());
    Ok(Engine { hooks, no_rows, _ballast: ballast, names, shapes, ctx, rt })
}

/// A response hook's return value as a verdict.
fn verdict(ret: Value<'_>) -> Result<Verdict, String> {
    match ret.type_of() {
        Type::Undefined => Ok(Verdict { ok: true, reason: None }),
        Type::Bool => Ok(Verdict { ok: ret.as_bool().unwrap_or(false), reason: None }),
        Type::Object => {
            let obj = ret.as_object().ok_or("not an object")?;
            let ok: Value = obj.get("ok").map_err(|e| e.to_string())?;
            let Some(ok) = ok.as_bool() else {
                return Err(format!("`ok` must be true or false, not {}", ok.type_name()));
            };
            let reason: Value = obj.get("reason").map_err(|e| e.to_string())?;
            let reason = match reason.type_of() {
                Type::Undefined | Type::Null => None,
                Type::String => reason.as_string().and_then(|s| s.to_string().ok()).map(|r| one_line(&r)),
                _ => return Err(format!("`reason` must be a string, not {}", reason.type_name())),
            };
            Ok(Verdict { ok, reason })
        }
        _ => Err(format!(
            "a response hook returns nothing or true (success), false, or {{ ok, reason }}, not {}",
            ret.type_name()
        )),
    }
}
