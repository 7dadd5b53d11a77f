//! `bench-s3`: an S3 endpoint over a local folder (each sub-folder a bucket, each file an
//! object) for Tessera's remote benchmarks, where every system — the loader and its peers —
//! reads the same bucket through its own S3 client.
//!
//! Reads are what the benchmarks measure, so this program serves them itself: `GetObject` and
//! `HeadObject` answer from the file's size and modification time (the ETag is derived from
//! both, as nginx does), and a range is read with `pread` in 1 MiB pieces, one blocking-pool
//! hop per piece. Everything else (listing, bucket calls, uploads) goes to the s3s project's
//! file-system backend (`s3s-fs`). `s3s-fs` alone served at most ~170 MB/s here: it reads a
//! body 4 KiB per blocking hop and hashes the whole file for each GET of an object it did not
//! upload itself.
//!
//! `bench-s3 ROOT ADDR ACCESS_KEY SECRET_KEY` (for example `bench-s3 target 127.0.0.1:9100
//! tessera tessera-bench`); prints `bench-s3: listening on ADDR` once it accepts connections.

use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::dto::*;
use s3s::service::S3ServiceBuilder;
use s3s::{S3, S3Request, S3Response, S3Result, s3_error};
use s3s_fs::FileSystem;

/// The size of one `pread` of a GET's body.
const PIECE: u64 = 1 << 20;

struct Bench {
    root: PathBuf,
    fs: FileSystem,
}

impl Bench {
    /// `ROOT/bucket/key`, refusing keys that would leave the bucket.
    fn object_path(&self, bucket: &str, key: &str) -> S3Result<PathBuf> {
        let mut path = self.root.join(bucket);
        for part in Path::new(key).components() {
            match part {
                Component::Normal(p) => path.push(p),
                _ => return Err(s3_error!(InvalidArgument, "key {key:?} leaves its bucket")),
            }
        }
        Ok(path)
    }

    /// The open file and its metadata, on the blocking pool.
    async fn open(&self, bucket: &str, key: &str) -> S3Result<(Arc<std::fs::File>, std::fs::Metadata)> {
        let path = self.object_path(bucket, key)?;
        let bucket_dir = self.root.join(bucket);
        let opened = tokio::task::spawn_blocking(move || {
            let file = std::fs::File::open(&path)?;
            let meta = file.metadata()?;
            Ok::<_, std::io::Error>((file, meta))
        })
        .await
        .map_err(|e| s3_error!(InternalError, "{e}"))?;
        match opened {
            Ok((file, meta)) if meta.is_file() => Ok((Arc::new(file), meta)),
            Ok(_) => Err(s3_error!(NoSuchKey)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if bucket_dir.is_dir() {
                    Err(s3_error!(NoSuchKey))
                } else {
                    Err(s3_error!(NoSuchBucket))
                }
            }
            Err(e) => Err(s3_error!(InternalError, "{e}")),
        }
    }
}

/// A stable strong ETag without reading the file: its size and modification time.
fn etag(meta: &std::fs::Metadata) -> ETag {
    let mtime = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).unwrap_or_default();
    ETag::Strong(format!("{:x}-{:x}", meta.len(), mtime.as_nanos()))
}

fn last_modified(meta: &std::fs::Metadata) -> Option<Timestamp> {
    meta.modified().ok().map(Timestamp::from)
}

/// `start..end` of `file`, `PIECE` bytes per `pread`.
fn body(file: Arc<std::fs::File>, start: u64, end: u64) -> impl futures::Stream<Item = std::io::Result<Bytes>> {
    futures::stream::try_unfold(start, move |at| {
        let file = file.clone();
        async move {
            if at >= end {
                return Ok(None);
            }
            let n = (end - at).min(PIECE);
            let piece = tokio::task::spawn_blocking(move || {
                let mut buf = BytesMut::zeroed(n as usize);
                file.read_exact_at(&mut buf, at)?;
                Ok::<_, std::io::Error>(buf.freeze())
            })
            .await
            .map_err(std::io::Error::other)??;
            Ok(Some((piece, at + n)))
        }
    })
}

#[async_trait::async_trait]
impl S3 for Bench {
    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        let input = req.input;
        let (file, meta) = self.open(&input.bucket, &input.key).await?;
        let len = meta.len();
        let (range, content_range) = match input.range {
            None => (0..len, None),
            Some(r) => {
                let r = r.check(len)?;
                let cr = format!("bytes {}-{}/{len}", r.start, r.end.saturating_sub(1));
                (r, Some(cr))
            }
        };
        let content_length = i64::try_from(range.end - range.start).map_err(|e| s3_error!(InternalError, "{e}"))?;
        Ok(S3Response::new(GetObjectOutput {
            body: Some(StreamingBlob::wrap(body(file, range.start, range.end))),
            content_length: Some(content_length),
            content_range,
            e_tag: Some(etag(&meta)),
            last_modified: last_modified(&meta),
            ..Default::default()
        }))
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        let input = req.input;
        let (_, meta) = self.open(&input.bucket, &input.key).await?;
        Ok(S3Response::new(HeadObjectOutput {
            content_length: Some(i64::try_from(meta.len()).map_err(|e| s3_error!(InternalError, "{e}"))?),
            e_tag: Some(etag(&meta)),
            last_modified: last_modified(&meta),
            ..Default::default()
        }))
    }

    // The rest is s3s-fs's.
    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        self.fs.head_bucket(req).await
    }
    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.fs.get_bucket_location(req).await
    }
    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        self.fs.list_buckets(req).await
    }
    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        self.fs.list_objects(req).await
    }
    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.fs.list_objects_v2(req).await
    }
    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        self.fs.create_bucket(req).await
    }
    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        self.fs.put_object(req).await
    }
    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        self.fs.delete_object(req).await
    }
    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        self.fs.delete_objects(req).await
    }
    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        self.fs.copy_object(req).await
    }
    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        self.fs.create_multipart_upload(req).await
    }
    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        self.fs.upload_part(req).await
    }
    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        self.fs.complete_multipart_upload(req).await
    }
    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.fs.abort_multipart_upload(req).await
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [root, addr, access_key, secret_key] = args.as_slice() else {
        eprintln!("usage: bench-s3 ROOT ADDR ACCESS_KEY SECRET_KEY");
        std::process::exit(2);
    };
    let root = std::fs::canonicalize(root)?;
    let fs = FileSystem::new(&root).map_err(|e| format!("{}: {e:?}", root.display()))?;
    let mut builder = S3ServiceBuilder::new(Bench { root, fs });
    builder.set_auth(SimpleAuth::from_single(access_key.as_str(), secret_key.as_str()));
    let service = builder.build();
    let listener = tokio::net::TcpListener::bind(addr.as_str()).await?;
    println!("bench-s3: listening on {}", listener.local_addr()?);
    let http = ConnBuilder::new(TokioExecutor::new());
    loop {
        let (socket, _) = listener.accept().await?;
        let _ = socket.set_nodelay(true);
        let conn = http.serve_connection(TokioIo::new(socket), service.clone()).into_owned();
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
}
