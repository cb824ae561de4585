//! The routes, shared by both models: what each request gets, not how it is scheduled.
//!
//! A request is answered in one or two steps. [`App::begin`] answers everything at once except an
//! authorised, valid request to one of the shop's routes (`GET /me`, `GET /products`,
//! `GET /orders`, `POST /orders`, `GET /orders/{id}`), for which it returns [`Step::Work`]: the
//! model then waits `io_wait` its own way (a blocking sleep that holds a pool thread, or a tokio
//! timer that holds nothing) and calls [`App::finish`], which does the CPU work and builds the
//! answer. Every shop route costs the same (one simulated database call and the same CPU work), so
//! a flow's capacity is the pool over the sum of its requests' costs, whichever routes it uses.
//! That split is the whole difference between the models, so it is the only thing they do
//! themselves. A request refused before its database call (no token, a body that does not
//! validate) is answered at once, as a real server answers it.
//!
//! `POST /orders` keeps what it created, so that `GET /orders/{id}` finds it: at most
//! [`KEPT_ORDERS`] orders, the oldest forgotten first (a long run must not grow the server).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cpu::CpuWork;
use crate::http::{Method, Request, Response};
use crate::metrics::{Metrics, Route};
use crate::token::Signer;
use crate::{DemoConfig, Model};

/// How many orders `GET /orders` returns.
pub(crate) const ORDERS_PER_PAGE: usize = 25;
/// How many orders created by `POST /orders` are kept for `GET /orders/{id}`: an hour at 40/s,
/// a few MB.
pub(crate) const KEPT_ORDERS: usize = 150_000;
/// The id of the first order `POST /orders` creates: above the listing's fixed ids (10001..).
const FIRST_CREATED_ID: u64 = 100_001;
/// How many products `GET /products` lists.
const PRODUCTS: u64 = 20;

/// What [`App::begin`] decided.
#[derive(Debug)]
pub(crate) enum Step {
    /// The answer is ready.
    Respond(Route, Response),
    /// An authorised, valid shop request: wait [`App::io_wait`], then call [`App::finish`].
    Work(Work),
}

/// A shop request that passed its checks and now costs a database call and CPU work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Work {
    /// `GET /me`: who the token was issued to.
    Me { user: String },
    /// `GET /products`: the catalogue.
    Products,
    /// `GET /orders`: a page of 25 orders (the seed scenario's route, answered as it always was).
    ListOrders,
    /// `POST /orders` with a valid body: create it.
    CreateOrder { user: String, sku: String, qty: u32 },
    /// `GET /orders/{id}`.
    GetOrder { id: u64 },
}

impl Work {
    /// The metrics' route of this work.
    fn route(&self) -> Route {
        match self {
            Work::Me { .. } => Route::Me,
            Work::Products => Route::Products,
            Work::ListOrders | Work::CreateOrder { .. } => Route::Orders,
            Work::GetOrder { .. } => Route::OrderById,
        }
    }
}

/// The application state of one server: its token key, calibrated CPU work and metrics.
#[derive(Debug)]
pub(crate) struct App {
    model: Model,
    signer: Signer,
    cpu: CpuWork,
    io_wait: Duration,
    pub(crate) metrics: Metrics,
    /// Orders created by `POST /orders`, by id; bounded by [`KEPT_ORDERS`].
    created: Mutex<BTreeMap<u64, Order>>,
    next_id: AtomicU64,
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

#[derive(Serialize, Clone, Debug)]
struct Order {
    id: u64,
    sku: String,
    qty: u32,
    unit_price_cents: u32,
    status: &'static str,
    created_at: &'static str,
}

#[derive(Serialize)]
struct Product {
    sku: String,
    name: String,
    unit_price_cents: u32,
    in_stock: bool,
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
            created: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(FIRST_CREATED_ID),
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

    /// Routes `req` and answers it, unless it is an authorised shop request (see [`Step`]).
    pub(crate) fn begin(&self, req: &Request) -> Step {
        let read = matches!(req.method, Method::Get | Method::Head);
        let path = req.path.as_str();
        match (path, req.method) {
            ("/", _) if read => {
                Step::Respond(Route::Root, Response::text(200, format!("perfops demo target (model {})\n", self.model)))
            }
            ("/health", _) if read => Step::Respond(Route::Health, Response::text(200, "ok")),
            ("/metrics", _) if read => Step::Respond(
                Route::Metrics,
                Response::new(200, "text/plain; version=0.0.4; charset=utf-8", self.metrics.render()),
            ),
            ("/auth", Method::Post) => Step::Respond(Route::Auth, self.auth(&req.body)),
            ("/me", _) if read => self.authorised_work(req, Route::Me, |user| Ok(Work::Me { user })),
            ("/products", _) if read => self.authorised_work(req, Route::Products, |_| Ok(Work::Products)),
            ("/orders", _) if read => self.authorised_work(req, Route::Orders, |_| Ok(Work::ListOrders)),
            ("/orders", Method::Post) => self.authorised_work(req, Route::Orders, |user| {
                let NewOrder { sku, qty } = new_order(&req.body)?;
                Ok(Work::CreateOrder { user, sku, qty })
            }),
            (p, _) if read && p.starts_with("/orders/") => match p["/orders/".len()..].parse::<u64>() {
                Ok(id) => self.authorised_work(req, Route::OrderById, |_| Ok(Work::GetOrder { id })),
                Err(_) => Step::Respond(
                    Route::OrderById,
                    Response::json_error(404, "no such order: an order id is a number (POST /orders answers it)"),
                ),
            },
            _ => Step::Respond(Route::Other, Response::json_error(404, "not found")),
        }
    }

    /// [`Step::Work`] from `work` when `req` carries a token of this server (its user given to
    /// `work`), else a 401; `work` may refuse the request with an answer of its own (a 422).
    fn authorised_work(
        &self,
        req: &Request,
        route: Route,
        work: impl FnOnce(String) -> Result<Work, Response>,
    ) -> Step {
        let Some(user) = self.authorised(req.authorization.as_deref()) else {
            let mut response = Response::json_error(401, "missing or invalid bearer token (POST /auth)");
            response.extra_header = Some(("WWW-Authenticate", "Bearer"));
            return Step::Respond(route, response);
        };
        match work(user) {
            Ok(work) => Step::Work(work),
            Err(refused) => Step::Respond(route, refused),
        }
    }

    /// The second half of a shop request, after the I/O wait: the CPU work, then the answer.
    pub(crate) fn finish(&self, work: &Work) -> (Route, Response) {
        let digest = format!("{:016x}", self.cpu.run(self.metrics.accepted.load(Ordering::Relaxed)));
        let route = work.route();
        let body = match work {
            Work::ListOrders => {
                let orders = (0..ORDERS_PER_PAGE as u64).map(listed_order).collect::<Vec<_>>();
                serde_json::to_vec(&OrdersPage { count: ORDERS_PER_PAGE, orders, digest })
            }
            Work::Me { user } => serde_json::to_vec(&serde_json::json!({ "user": user, "digest": digest })),
            Work::Products => {
                let products = (1..=PRODUCTS).map(product).collect::<Vec<_>>();
                serde_json::to_vec(&serde_json::json!({ "count": PRODUCTS, "products": products, "digest": digest }))
            }
            Work::CreateOrder { user, sku, qty } => {
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                let order = Order {
                    id,
                    sku: sku.clone(),
                    qty: *qty,
                    unit_price_cents: price_of(sku),
                    status: "pending",
                    created_at: "2024-05-01T12:00:00Z",
                };
                let body = serde_json::json!({ "id": id, "user": user, "order": &order });
                self.keep(order);
                return match serde_json::to_vec(&body) {
                    Ok(body) => (route, Response::json(201, body)),
                    Err(e) => (route, Response::json_error(500, &e.to_string())),
                };
            }
            Work::GetOrder { id } => {
                // A poisoned lock only means another request panicked mid-insert: the map is whole.
                let found = self.created.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned();
                match found {
                    Some(order) => serde_json::to_vec(&serde_json::json!({ "order": order, "digest": digest })),
                    None => return (route, Response::json_error(404, &format!("no order {id}"))),
                }
            }
        };
        match body {
            Ok(body) => (route, Response::json(200, body)),
            Err(e) => (route, Response::json_error(500, &e.to_string())),
        }
    }

    /// Keeps a created order, forgetting the oldest beyond [`KEPT_ORDERS`].
    fn keep(&self, order: Order) {
        let mut created = self.created.lock().unwrap_or_else(|p| p.into_inner());
        created.insert(order.id, order);
        while created.len() > KEPT_ORDERS {
            created.pop_first();
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

    /// The user of a bearer token this server issued, or `None`.
    fn authorised(&self, authorization: Option<&str>) -> Option<String> {
        let value = authorization?;
        let mut parts = value.trim().splitn(2, ' ');
        let scheme = parts.next().unwrap_or("");
        let token = parts.next().unwrap_or("").trim();
        if !scheme.eq_ignore_ascii_case("bearer") || !self.signer.verify(token) {
            return None;
        }
        Some(self.signer.user_of(token).unwrap_or_else(|| "anonymous".to_owned()))
    }
}

/// The body of `POST /orders`, as its checks read it.
struct NewOrder {
    sku: String,
    qty: u32,
}

/// Validates a `POST /orders` body: a JSON object with a `sku` string and a `qty` that is a JSON
/// integer from 1 to 1000. A `qty` sent as the string `"3"` is refused (422), naming the field and
/// what came, as a strict API does: that is the mistake a CSV feeder invites.
fn new_order(body: &[u8]) -> Result<NewOrder, Response> {
    let refuse = |message: String| Err(Response::json_error(422, &message));
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return refuse("body must be JSON like {\"sku\":\"SKU-00001\",\"qty\":1}".to_owned());
    };
    let Some(fields) = value.as_object() else {
        return refuse("body must be a JSON object like {\"sku\":\"SKU-00001\",\"qty\":1}".to_owned());
    };
    let sku = match fields.get("sku") {
        Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
        Some(other) => return refuse(format!("field `sku` must be a non-empty string, found {other}")),
        None => return refuse("field `sku` is missing".to_owned()),
    };
    let qty = match fields.get("qty") {
        Some(n @ serde_json::Value::Number(_)) => match n.as_u64() {
            Some(q @ 1..=1000) => q as u32,
            _ => return refuse(format!("field `qty` must be an integer from 1 to 1000, found {n}")),
        },
        Some(other) => return refuse(format!("field `qty` must be a JSON integer, found {other}")),
        None => return refuse("field `qty` is missing".to_owned()),
    };
    Ok(NewOrder { sku, qty })
}

/// Order `i` of the `GET /orders` page (ids 10001..).
fn listed_order(i: u64) -> Order {
    Order {
        id: 10_001 + i,
        sku: format!("SKU-{:05}", (i * 7919) % 100_000),
        qty: 1 + (i % 4) as u32,
        unit_price_cents: 499 + ((i * 1_237) % 9_000) as u32,
        status: ["pending", "paid", "shipped", "delivered"][(i % 4) as usize],
        created_at: "2024-05-01T12:00:00Z",
    }
}

/// Product `i` of the catalogue (SKU-00001..).
fn product(i: u64) -> Product {
    let sku = format!("SKU-{i:05}");
    Product { unit_price_cents: price_of(&sku), name: format!("Product {i}"), sku, in_stock: !i.is_multiple_of(7) }
}

/// A stable price for any sku, so that a created order has one.
fn price_of(sku: &str) -> u32 {
    499 + (sku.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % 9_000)
}
