//! The routes, shared by both models: what each request gets, not how it is scheduled.
//!
//! A request is answered in one or two steps. [`App::begin`] answers everything at once except an
//! authorised `GET /orders`, for which it returns [`Step::Orders`]: the model then waits `io_wait`
//! its own way (a blocking sleep that holds a pool thread, or a tokio timer that holds nothing)
//! and calls [`App::finish_orders`], which does the CPU work and builds the ~2 KB body. That split
//! is the whole difference between the models, so it is the only thing they do themselves.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cpu::CpuWork;
use crate::http::{Method, Request, Response};
use crate::metrics::{Metrics, Route};
use crate::token::Signer;
use crate::{DemoConfig, Model};

/// How many orders `GET /orders` returns.
pub(crate) const ORDERS_PER_PAGE: usize = 25;

/// What [`App::begin`] decided.
#[derive(Debug)]
pub(crate) enum Step {
    /// The answer is ready.
    Respond(Route, Response),
    /// An authorised `GET /orders`: wait [`App::io_wait`], then call [`App::finish_orders`].
    Orders,
}

/// The application state of one server: its token key, calibrated CPU work and metrics.
#[derive(Debug)]
pub(crate) struct App {
    model: Model,
    signer: Signer,
    cpu: CpuWork,
    io_wait: Duration,
    pub(crate) metrics: Metrics,
}

/// Keeps `demo_connections_open` counted while a connection lives, on every path out of it
/// (close, error, idle timeout, shutdown).
#[derive(Debug)]
pub(crate) struct OpenConnection {
    app: Arc<App>,
}

impl OpenConnection {
    /// The server's app.
    pub(crate) fn app(&self) -> &App {
        &self.app
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.app.metrics.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Deserialize)]
struct AuthBody {
    user: Option<String>,
}

#[derive(Serialize)]
struct Order {
    id: u64,
    sku: String,
    qty: u32,
    unit_price_cents: u32,
    status: &'static str,
    created_at: &'static str,
}

#[derive(Serialize)]
struct OrdersPage {
    count: usize,
    orders: Vec<Order>,
    /// The result of the CPU work, so that it is visibly used.
    digest: String,
}

impl App {
    /// The app for `config`; calibrates the CPU work (a few tens of milliseconds).
    pub(crate) fn new(config: &DemoConfig) -> App {
        let max = match config.model {
            Model::Threads => config.pool_size(),
            Model::Async => config.worker_threads(),
        };
        App {
            model: config.model,
            signer: Signer::new(),
            cpu: CpuWork::calibrate(config.cpu_work),
            io_wait: config.io_wait,
            metrics: Metrics::new(config.model, max),
        }
    }

    /// Counts a newly accepted connection until the returned guard is dropped.
    pub(crate) fn open_connection(self: &Arc<Self>) -> OpenConnection {
        self.metrics.accepted.fetch_add(1, Ordering::Relaxed);
        self.metrics.connections.fetch_add(1, Ordering::Relaxed);
        OpenConnection { app: Arc::clone(self) }
    }

    /// The simulated I/O wait of `GET /orders`.
    pub(crate) fn io_wait(&self) -> Duration {
        self.io_wait
    }

    /// Routes `req` and answers it, unless it is an authorised `GET /orders` (see [`Step`]).
    pub(crate) fn begin(&self, req: &Request) -> Step {
        let read = matches!(req.method, Method::Get | Method::Head);
        match (req.path.as_str(), req.method) {
            ("/", _) if read => {
                Step::Respond(Route::Root, Response::text(200, format!("perfops demo target (model {})\n", self.model)))
            }
            ("/health", _) if read => Step::Respond(Route::Health, Response::text(200, "ok")),
            ("/metrics", _) if read => Step::Respond(
                Route::Metrics,
                Response::new(200, "text/plain; version=0.0.4; charset=utf-8", self.metrics.render()),
            ),
            ("/auth", Method::Post) => Step::Respond(Route::Auth, self.auth(&req.body)),
            ("/orders", _) if read => {
                if self.authorised(req.authorization.as_deref()) {
                    Step::Orders
                } else {
                    let mut response = Response::json_error(401, "missing or invalid bearer token (POST /auth)");
                    response.extra_header = Some(("WWW-Authenticate", "Bearer"));
                    Step::Respond(Route::Orders, response)
                }
            }
            _ => Step::Respond(Route::Other, Response::json_error(404, "not found")),
        }
    }

    /// The second half of `GET /orders`, after the I/O wait: CPU work, then 25 orders as JSON.
    pub(crate) fn finish_orders(&self) -> Response {
        let digest = self.cpu.run(self.metrics.accepted.load(Ordering::Relaxed));
        let orders = (0..ORDERS_PER_PAGE as u64)
            .map(|i| Order {
                id: 10_001 + i,
                sku: format!("SKU-{:05}", (i * 7919) % 100_000),
                qty: 1 + (i % 4) as u32,
                unit_price_cents: 499 + ((i * 1_237) % 9_000) as u32,
                status: ["pending", "paid", "shipped", "delivered"][(i % 4) as usize],
                created_at: "2024-05-01T12:00:00Z",
            })
            .collect();
        let page = OrdersPage { count: ORDERS_PER_PAGE, orders, digest: format!("{digest:016x}") };
        match serde_json::to_vec(&page) {
            Ok(body) => Response::json(200, body),
            Err(e) => Response::json_error(500, &e.to_string()),
        }
    }

    fn auth(&self, body: &[u8]) -> Response {
        let user = if body.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            match serde_json::from_slice::<AuthBody>(body) {
                Ok(parsed) => parsed.user,
                Err(_) => return Response::json_error(400, "body must be JSON like {\"user\":\"name\"}"),
            }
        };
        let token = self.signer.issue(user.as_deref().unwrap_or("anonymous"));
        Response::json(200, serde_json::json!({ "token": token }).to_string())
    }

    fn authorised(&self, authorization: Option<&str>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        let mut parts = value.trim().splitn(2, ' ');
        let scheme = parts.next().unwrap_or("");
        let token = parts.next().unwrap_or("").trim();
        scheme.eq_ignore_ascii_case("bearer") && self.signer.verify(token)
    }
}
