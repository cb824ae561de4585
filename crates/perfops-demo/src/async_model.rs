//! The async model: a tokio multi-thread runtime, one task per connection.
//!
//! The I/O wait is a timer, so a waiting request holds no thread and the number of requests in
//! flight is bounded only by the clients; the CPU work runs inline on a runtime worker (as it would
//! in a real async handler), so capacity is bounded by the cores: with 20 ms of I/O wait and 0.5 ms
//! of CPU it holds thousands of requests per second where the threads model holds ~500. There is
//! no ready queue to measure, so `demo_queue_depth` stays 0 here. It shares the framing, routes and
//! metrics with the threads model and owns only the scheduling.

use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

use crate::app::{App, OpenConnection, Step};
use crate::http::{self, Method};
use crate::metrics::Route;
use crate::{DemoConfig, DemoError, KEEP_ALIVE_IDLE, STOP_POLL, WRITE_TIMEOUT};

/// How long the runtime waits for tasks when the server stops; idle connections are dropped.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Runs the async model on `listener` until `stop` is set.
pub(crate) fn run(
    config: &DemoConfig,
    listener: StdListener,
    app: Arc<App>,
    stop: &Arc<AtomicBool>,
    on_ready: impl FnOnce(),
) -> Result<(), DemoError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads())
        .thread_name("demo-async")
        .enable_all()
        .build()
        .map_err(DemoError::Start)?;
    let result = runtime.block_on(async {
        let listener = TcpListener::from_std(listener).map_err(DemoError::Start)?;
        on_ready();
        while !stop.load(Ordering::Relaxed) {
            match timeout(STOP_POLL, listener.accept()).await {
                Err(_elapsed) => {}
                Ok(Ok((stream, _))) => {
                    let open = app.open_connection();
                    tokio::spawn(connection(stream, open));
                }
                // Out of descriptors, or the client gave up: back off and go on.
                Ok(Err(_)) => tokio::time::sleep(STOP_POLL / 10).await,
            }
        }
        Ok(())
    });
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    result
}

/// Serves one connection's requests in turn until it closes, idles out or breaks.
async fn connection(mut stream: TcpStream, open: OpenConnection) {
    let app = open.app();
    // A failure here only costs latency, never correctness.
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::with_capacity(4096);
    let mut out = Vec::with_capacity(4096);
    loop {
        match http::parse(&buf) {
            Ok(Some((req, used))) => {
                buf.drain(..used);
                let started = Instant::now();
                app.metrics.busy.fetch_add(1, Ordering::Relaxed);
                let (route, response) = match app.begin(&req) {
                    Step::Respond(route, response) => (route, response),
                    Step::Work(work) => {
                        // Even a zero sleep would wait for the timer wheel's next millisecond tick.
                        if !app.io_wait().is_zero() {
                            tokio::time::sleep(app.io_wait()).await;
                        }
                        app.finish(&work)
                    }
                };
                let keep_alive = req.keep_alive && !response.close;
                out.clear();
                response.encode(keep_alive, req.http10, req.method == Method::Head, &mut out);
                let written = timeout(WRITE_TIMEOUT, stream.write_all(&out)).await;
                app.metrics.record(route, response.status, started.elapsed());
                app.metrics.busy.fetch_sub(1, Ordering::Relaxed);
                if !matches!(written, Ok(Ok(()))) {
                    return;
                }
                if !keep_alive {
                    let _ = stream.shutdown().await;
                    return;
                }
                continue;
            }
            Ok(None) => {}
            Err(error) => {
                let started = Instant::now();
                let response = error.response();
                out.clear();
                response.encode(false, false, false, &mut out);
                // Closed either way; a client that left does not need the 400.
                let _ = timeout(WRITE_TIMEOUT, stream.write_all(&out)).await;
                let _ = stream.shutdown().await;
                app.metrics.record(Route::Invalid, response.status, started.elapsed());
                return;
            }
        }
        match timeout(KEEP_ALIVE_IDLE, stream.read_buf(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => {}
            // EOF, error or idle too long.
            _ => return,
        }
    }
}
