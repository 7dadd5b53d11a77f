//! A TCP proxy, run as its own process, that adds a fixed round-trip time to every byte
//! between its clients and one upstream server: each direction holds what it read for half
//! the round trip before writing it on. Every client of a benchmark (the loader, each peer)
//! then sees the same network delay, with no wrapper inside any of them.
//!
//! It stands in for `tc qdisc … netem delay` on the loopback device of a private network
//! namespace, which is the better tool where the kernel has it: this machine's kernel has
//! neither `sch_netem` nor `sch_fq` (so no EDT delay either). Unlike netem, the proxy costs
//! CPU (a copy in each direction, on the same cores as the clients); `scripts/benchbucket.sh`
//! prints which of the two it used.
//!
//! `delay_proxy LISTEN_ADDR UPSTREAM_ADDR RTT_MS` (for example `127.0.0.1:9101 127.0.0.1:9100 20`);
//! it prints `delay_proxy: listening on ADDR` once it accepts connections.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Bytes read per chunk; a chunk is the unit that waits out the delay.
const CHUNK: usize = 256 << 10;
/// Chunks held per direction: with 256 KiB chunks, 64 MiB, which keeps a one-way delay of
/// 50 ms from limiting a connection below 1.3 GB/s.
const HELD: usize = 256;

/// Reads `from` and queues what it read, stamped with when it may leave. Reads land in one
/// buffer that each chunk is split off (no zeroing, one allocation per `CHUNK` bytes).
async fn read_side(mut from: OwnedReadHalf, queue: mpsc::Sender<(Instant, Bytes)>, one_way: Duration) {
    let mut buf = BytesMut::with_capacity(CHUNK);
    loop {
        if buf.capacity() < CHUNK / 4 {
            buf = BytesMut::with_capacity(CHUNK);
        }
        match from.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return, // dropping the sender tells the writer to close
            Ok(_) => {
                if queue.send((Instant::now() + one_way, buf.split().freeze())).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Writes the queued chunks to `to`, each no earlier than its stamp; closes `to`'s sending
/// side when the reader ends.
async fn write_side(mut to: OwnedWriteHalf, mut queue: mpsc::Receiver<(Instant, Bytes)>) {
    while let Some((due, buf)) = queue.recv().await {
        tokio::time::sleep_until(due).await;
        if to.write_all(&buf).await.is_err() {
            return;
        }
    }
    let _ = to.shutdown().await;
}

/// One client connection: a connection to the upstream and a delayed pump each way.
async fn serve(client: TcpStream, upstream: SocketAddr, one_way: Duration) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return; // the client sees its connection closed
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_r, client_w) = client.into_split();
    let (server_r, server_w) = server.into_split();
    let (up_tx, up_rx) = mpsc::channel(HELD);
    let (down_tx, down_rx) = mpsc::channel(HELD);
    tokio::join!(
        read_side(client_r, up_tx, one_way),
        write_side(server_w, up_rx),
        read_side(server_r, down_tx, one_way),
        write_side(client_w, down_rx),
    );
}

fn main() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(listen), Some(upstream), Some(rtt)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("usage: delay_proxy LISTEN_ADDR UPSTREAM_ADDR RTT_MS");
        std::process::exit(2);
    };
    let listen: SocketAddr = listen.parse()?;
    let upstream: SocketAddr = upstream.parse()?;
    let rtt_ms: f64 = rtt.parse()?;
    if !(rtt_ms.is_finite() && rtt_ms >= 0.0) {
        return Err(format!("RTT_MS must be a finite number ≥ 0, not {rtt}").into());
    }
    let one_way = Duration::from_secs_f64(rtt_ms / 2000.0);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(listen).await?;
        println!("delay_proxy: listening on {} (upstream {upstream}, RTT {rtt_ms} ms)", listener.local_addr()?);
        loop {
            let (client, _) = listener.accept().await?;
            tokio::spawn(serve(client, upstream, one_way));
        }
    })
}
