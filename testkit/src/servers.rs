//! The dataset roots the storage suites run against, and the rule for skipping.
//!
//! S3 and Azure roots need the local servers (`scripts/servers.sh start`, then
//! `eval "$(scripts/servers.sh env)"`): `TESSERA_TEST_S3=s3://BUCKET` and
//! `TESSERA_TEST_AZURE=az://CONTAINER` name them. When such a variable is unset, a test prints
//! a skip notice and returns, except in CI (`CI` set to anything but `false`/`0`), where it
//! panics: storage tests are never skipped silently there.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use object_store::ObjectStore;
use tessera::Store;

/// Where a test dataset lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A fresh temporary directory (the default local store).
    Local,
    /// `memory://<unique>`.
    Memory,
    /// `s3://BUCKET/<unique>` on the S3 test server.
    S3,
    /// `az://CONTAINER/<unique>` on the Azure test server.
    Azure,
}

impl Backend {
    /// Every backend.
    pub const ALL: [Self; 4] = [Self::Local, Self::Memory, Self::S3, Self::Azure];
}

/// Whether the tests run in CI.
#[must_use]
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// A name unique in this machine's test runs: `<tag>-<pid>-<nanos>-<n>`.
#[must_use]
pub fn unique(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{tag}-{}-{nanos}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn reachable(url: &str) -> Option<SocketAddr> {
    let hostport = url.split_once("://").map_or(url, |(_, r)| r).split('/').next().unwrap_or_default();
    let addr = hostport.to_socket_addrs().ok()?.next()?;
    TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok().map(|_| addr)
}

/// Skip (outside CI) or fail (in CI) because a server is missing.
fn missing(what: &str, why: &str) -> Option<String> {
    let msg = format!("{what} test server not running: run scripts/servers.sh start ({why})");
    assert!(!in_ci(), "{msg}; in CI storage tests are never skipped");
    eprintln!("SKIPPED: {msg}; then eval \"$(scripts/servers.sh env)\"");
    None
}

/// The S3 test root (`TESSERA_TEST_S3`), after checking the endpoint answers.
///
/// # Panics
/// In CI, when it is unset or the server does not answer.
#[must_use]
pub fn s3_base() -> Option<String> {
    let Ok(base) = std::env::var("TESSERA_TEST_S3") else {
        return missing("S3", "TESSERA_TEST_S3 is unset");
    };
    let endpoint = std::env::var("AWS_ENDPOINT").unwrap_or_default();
    if endpoint.is_empty() {
        return missing("S3", "AWS_ENDPOINT is unset");
    }
    if reachable(&endpoint).is_none() {
        return missing("S3", &format!("nothing answers at AWS_ENDPOINT={endpoint}"));
    }
    Some(base.trim_end_matches('/').to_string())
}

/// The address of the S3 test server (from `AWS_ENDPOINT`), when it answers.
#[must_use]
pub fn s3_server_addr() -> Option<SocketAddr> {
    reachable(&std::env::var("AWS_ENDPOINT").ok()?)
}

/// The Azure test root (`TESSERA_TEST_AZURE`), after checking the emulator answers.
///
/// # Panics
/// In CI, when it is unset or the server does not answer.
#[must_use]
pub fn azure_base() -> Option<String> {
    let Ok(base) = std::env::var("TESSERA_TEST_AZURE") else {
        return missing("Azure", "TESSERA_TEST_AZURE is unset");
    };
    let url = std::env::var("AZURITE_BLOB_STORAGE_URL").unwrap_or_else(|_| "http://127.0.0.1:10000".into());
    if reachable(&url).is_none() {
        return missing("Azure", &format!("nothing answers at {url}"));
    }
    Some(base.trim_end_matches('/').to_string())
}

/// A fresh, empty dataset root on one backend.
#[derive(Debug)]
pub struct TestRoot {
    /// The backend.
    pub backend: Backend,
    /// The location to pass to `Store::open` / `Dataset::create`.
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestRoot {
    /// A fresh root named after `name`; `None` when the backend's server is not configured
    /// (outside CI only; a notice is printed).
    ///
    /// # Panics
    /// In CI when a server is missing; if a temporary directory cannot be created.
    #[must_use]
    pub fn new(backend: Backend, name: &str) -> Option<Self> {
        let id = unique(name);
        let (url, dir) = match backend {
            Backend::Local => {
                let dir = tempfile::tempdir().expect("temporary directory");
                (dir.path().join(&id).to_str().expect("UTF-8 temp path").to_string(), Some(dir))
            }
            Backend::Memory => (format!("memory://{id}"), None),
            Backend::S3 => (format!("{}/{id}", s3_base()?), None),
            Backend::Azure => (format!("{}/{id}", azure_base()?), None),
        };
        Some(Self { backend, url, _dir: dir })
    }

    /// `Store::open` of the root.
    ///
    /// # Panics
    /// If the store cannot be opened.
    #[must_use]
    pub fn store(&self) -> Store {
        Store::open(&self.url).unwrap_or_else(|e| panic!("opening {}: {e}", self.url))
    }

    /// The root's underlying object store and key prefix, for wrapping (fault injection,
    /// counting). `endpoint` overrides `AWS_ENDPOINT` for S3 (a [`crate::LatencyProxy`]).
    ///
    /// # Panics
    /// If the store cannot be built.
    #[must_use]
    pub fn object_store(&self, endpoint: Option<&str>) -> (Arc<dyn ObjectStore>, String) {
        match (self.backend, endpoint) {
            (Backend::S3, Some(ep)) => {
                tessera::store::install_crypto_provider();
                let s = object_store::aws::AmazonS3Builder::from_env()
                    .with_url(&self.url)
                    .with_endpoint(ep)
                    .build()
                    .expect("S3 store");
                let prefix = self.url.splitn(4, '/').nth(3).unwrap_or_default().trim_end_matches('/').to_string();
                (Arc::new(s), prefix)
            }
            (_, Some(_)) => panic!("an endpoint override is only supported for S3"),
            _ => {
                let st = self.store();
                let prefix =
                    if self.backend == Backend::Local { "" } else { self.url.splitn(4, '/').nth(3).unwrap_or("") };
                (st.object_store().clone(), prefix.trim_end_matches('/').to_string())
            }
        }
    }

    /// A store over a wrapped object store (see [`TestRoot::object_store`]).
    #[must_use]
    pub fn wrapped(&self, inner: Arc<dyn ObjectStore>, prefix: &str) -> Store {
        Store::from_object_store(inner, prefix, true)
    }
}
