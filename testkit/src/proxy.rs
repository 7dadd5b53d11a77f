//! A loopback TCP proxy that adds delay in front of a local object-storage server.
//!
//! Point `AWS_ENDPOINT` (or a builder's `with_endpoint`) at [`LatencyProxy::endpoint`] and every
//! connection pays [`ProxyConfig::per_connection`] once, every request (the first bytes the
//! client sends after the server last answered) pays [`ProxyConfig::per_request`]. Optionally a
//! fraction of GET requests get their connection closed instead of forwarded, which the HTTP
//! stores of `object_store` see as a transport error and retry.
//!
//! The proxy runs on its own small tokio runtime, so it works from synchronous tests; it stops
//! when dropped.

use std::io;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::faulty::Latency;
use crate::rng::XorShift;

/// What the proxy adds.
#[derive(Clone, Debug, Default)]
pub struct ProxyConfig {
    /// Delay before a new client connection is connected upstream.
    pub per_connection: Duration,
    /// Delay before each request is forwarded.
    pub per_request: Latency,
    /// Probability that a GET request's connection is closed instead of forwarded.
    pub reset_get_rate: f64,
    /// Seed for jitter and resets.
    pub seed: u64,
}

/// Counters of the proxy.
#[derive(Debug, Default)]
pub struct ProxyStats {
    /// Client connections accepted.
    pub connections: AtomicU64,
    /// Requests forwarded (delayed).
    pub requests: AtomicU64,
    /// GET requests answered by closing the connection.
    pub resets: AtomicU64,
}

/// A running proxy; stops on drop.
#[derive(Debug)]
pub struct LatencyProxy {
    addr: SocketAddr,
    rt: Option<tokio::runtime::Runtime>,
    /// The counters.
    pub stats: Arc<ProxyStats>,
}

impl LatencyProxy {
    /// Starts a proxy on `127.0.0.1:<free port>` forwarding to `target`.
    ///
    /// # Errors
    /// If the listening socket or the runtime cannot be created.
    pub fn start(target: SocketAddr, config: ProxyConfig) -> io::Result<Self> {
        let std_listener = StdListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("testkit-proxy")
            .enable_all()
            .build()?;
        let stats = Arc::new(ProxyStats::default());
        let rng = Arc::new(Mutex::new(XorShift::new(config.seed)));
        let config = Arc::new(config);
        let s = stats.clone();
        rt.spawn(async move {
            let Ok(listener) = TcpListener::from_std(std_listener) else { return };
            while let Ok((client, _)) = listener.accept().await {
                s.connections.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(serve(client, target, config.clone(), rng.clone(), s.clone()));
            }
        });
        Ok(Self { addr, rt: Some(rt), stats })
    }

    /// The proxy's address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, for `AWS_ENDPOINT` or `with_endpoint`.
    #[must_use]
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

async fn serve(
    mut client: TcpStream,
    target: SocketAddr,
    config: Arc<ProxyConfig>,
    rng: Arc<Mutex<XorShift>>,
    stats: Arc<ProxyStats>,
) {
    if !config.per_connection.is_zero() {
        tokio::time::sleep(config.per_connection).await;
    }
    let Ok(mut upstream) = TcpStream::connect(target).await else { return };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (mut cr, mut cw) = client.split();
    let (mut ur, mut uw) = upstream.split();
    // Set when the server has sent something: the next client bytes start a new request.
    let answered = AtomicBool::new(true);
    let up = async {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = cr.read(&mut buf).await?;
            if n == 0 {
                uw.shutdown().await?;
                return Ok::<(), io::Error>(());
            }
            if answered.swap(false, Ordering::AcqRel) {
                let (delay, reset) = {
                    let mut r = rng.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    let j = config.per_request.jitter.as_nanos() as u64;
                    let delay =
                        config.per_request.fixed + Duration::from_nanos(if j == 0 { 0 } else { r.below(j + 1) });
                    (delay, buf[..n].starts_with(b"GET ") && r.chance(config.reset_get_rate))
                };
                if reset {
                    stats.resets.fetch_add(1, Ordering::Relaxed);
                    return Err(io::Error::new(io::ErrorKind::ConnectionReset, "injected reset"));
                }
                stats.requests.fetch_add(1, Ordering::Relaxed);
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
            }
            uw.write_all(&buf[..n]).await?;
        }
    };
    let down = async {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = ur.read(&mut buf).await?;
            if n == 0 {
                cw.shutdown().await?;
                return Ok::<(), io::Error>(());
            }
            answered.store(true, Ordering::Release);
            cw.write_all(&buf[..n]).await?;
        }
    };
    // Either side failing (or a reset) drops both sockets, which closes the connection.
    let _ = tokio::try_join!(up, down);
}
